//! Group commit: many writers wait on one sync. The first waiter that finds
//! no sync running leads: it syncs everything written so far and completes
//! every waiter below the new durable offset, in offset order. Runtime-free
//! (plain wakers), so it runs the same on tokio and in simulation.
//! Invariant: once a sync fails the log is poisoned and no waiter, present
//! or future, is told its data is durable.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::error::{Error, Result};

/// Durable offset, the leader flag, parked waiters and the poison state.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    durable: u64,
    leading: bool,
    poisoned: Option<String>,
    /// Parked waiters by (end offset, ticket): completion in offset order.
    waiters: BTreeMap<(u64, u64), Waker>,
    next_ticket: u64,
    syncs: u64,
}

/// What a waiter should do after looking at the state.
enum Turn {
    Done,
    /// Sync from `from`; `parked`: other writers are parked, so first
    /// let the ones about to append do so and ride this sync.
    Lead {
        from: u64,
        parked: bool,
    },
    Park,
}

impl GroupCommit {
    /// A group commit whose log is durable up to `durable`.
    pub(crate) fn new(durable: u64) -> Self {
        Self {
            state: Mutex::new(State {
                durable,
                ..State::default()
            }),
        }
    }

    /// Offset below which every byte is durable.
    pub(crate) fn durable(&self) -> u64 {
        self.lock().durable
    }

    /// Records that `[0, to)` is durable (synced outside group commit).
    pub(crate) fn advance(&self, to: u64) {
        let mut st = self.lock();
        st.durable = st.durable.max(to);
    }

    /// Forgets durability above `to` after the log was cut back there.
    pub(crate) fn rewind(&self, to: u64) {
        let mut st = self.lock();
        st.durable = st.durable.min(to);
    }

    /// Number of syncs the group commit has issued.
    pub(crate) fn syncs(&self) -> u64 {
        self.lock().syncs
    }

    /// Fails with `Poisoned` once any sync has failed.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.lock().poisoned {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Fences the log: every parked and later waiter fails.
    pub(crate) fn poison(&self, reason: String) {
        let mut st = self.lock();
        if st.poisoned.is_none() {
            st.poisoned = Some(reason);
        }
        for (_, w) in std::mem::take(&mut st.waiters) {
            w.wake();
        }
    }

    /// Waits until `[0, end)` is durable. `written` reports how far the log
    /// has been written; `sync(from, to)` makes a range durable. `company`:
    /// the caller knows more writers are right behind it, so if it leads it
    /// lets them append first, as when writers are parked.
    pub(crate) async fn wait<W, S, F>(
        &self,
        end: u64,
        company: bool,
        written: W,
        sync: S,
    ) -> Result<()>
    where
        W: Fn() -> u64,
        S: Fn(u64, u64) -> F,
        F: Future<Output = Result<()>>,
    {
        loop {
            match self.turn(end)? {
                Turn::Done => return Ok(()),
                Turn::Park => {
                    let ticket = {
                        let mut st = self.lock();
                        st.next_ticket += 1;
                        st.next_ticket
                    };
                    Parked {
                        gc: self,
                        key: (end, ticket),
                    }
                    .await;
                }
                Turn::Lead { from, parked } => {
                    let mut guard = LeaderGuard {
                        gc: self,
                        live: true,
                    };
                    // With company, let writers just released by the
                    // previous sync append first, so they ride this sync
                    // instead of the next. A lone writer syncs at once: on
                    // a disk that syncs on the caller's thread its whole
                    // send then completes in one poll, with no hop.
                    if parked || company {
                        YieldNow(false).await;
                    }
                    let to = written();
                    let result = if to > from {
                        sync(from, to).await
                    } else {
                        Ok(())
                    };
                    guard.live = false;
                    self.finish_lead(to, result)?;
                }
            }
        }
    }

    fn turn(&self, end: u64) -> Result<Turn> {
        let mut st = self.lock();
        if let Some(reason) = &st.poisoned {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        if st.durable >= end {
            return Ok(Turn::Done);
        }
        if st.leading {
            return Ok(Turn::Park);
        }
        st.leading = true;
        Ok(Turn::Lead {
            from: st.durable,
            parked: !st.waiters.is_empty(),
        })
    }

    fn finish_lead(&self, to: u64, result: Result<()>) -> Result<()> {
        let mut st = self.lock();
        st.leading = false;
        st.syncs += 1;
        match result {
            Ok(()) => {
                st.durable = st.durable.max(to);
                // Complete everything now durable, in offset order, and wake
                // the lowest remaining waiter so it leads the next sync.
                let first_pending = (st.durable + 1, 0);
                let rest = st.waiters.split_off(&first_pending);
                let done = std::mem::replace(&mut st.waiters, rest);
                for (_, w) in done {
                    w.wake();
                }
                if let Some((_, w)) = st.waiters.first_key_value() {
                    w.wake_by_ref();
                }
                Ok(())
            }
            Err(e) => {
                let reason = e.to_string();
                st.poisoned.get_or_insert(reason);
                for (_, w) in std::mem::take(&mut st.waiters) {
                    w.wake();
                }
                Err(e)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .expect("invariant: group commit lock not poisoned")
    }
}

/// Releases leadership if a leading waiter is dropped mid-sync, so the
/// remaining waiters are never stranded.
struct LeaderGuard<'a> {
    gc: &'a GroupCommit,
    live: bool,
}

impl Drop for LeaderGuard<'_> {
    fn drop(&mut self) {
        if self.live {
            let mut st = self.gc.lock();
            st.leading = false;
            if let Some((_, w)) = st.waiters.first_key_value() {
                w.wake_by_ref();
            }
        }
    }
}

/// Pending once (after asking to be polled again), then ready: a
/// runtime-free yield.
struct YieldNow(bool);

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            return Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// A parked waiter: ready once anything it waits on may have changed
/// (durable offset passed its end, poison, or leadership free).
struct Parked<'a> {
    gc: &'a GroupCommit,
    key: (u64, u64),
}

impl Future for Parked<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.gc.lock();
        if st.poisoned.is_some() || st.durable >= self.key.0 || !st.leading {
            st.waiters.remove(&self.key);
            return Poll::Ready(());
        }
        st.waiters.insert(self.key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.gc.lock().waiters.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::future::{ready, Future};
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    use super::GroupCommit;

    #[test]
    fn a_lone_writer_with_an_immediate_sync_is_durable_in_one_poll() {
        let gc = GroupCommit::new(0);
        let synced = Cell::new(None);
        let wait = gc.wait(
            100,
            false,
            || 100,
            |from, to| {
                synced.set(Some((from, to)));
                ready(Ok(()))
            },
        );
        let mut cx = Context::from_waker(Waker::noop());
        let poll = pin!(wait).poll(&mut cx);
        assert!(
            matches!(poll, Poll::Ready(Ok(()))),
            "took more than one poll"
        );
        assert_eq!(synced.get(), Some((0, 100)));
        assert_eq!(gc.durable(), 100);
        assert_eq!(gc.syncs(), 1);
    }

    #[test]
    fn a_leader_with_parked_company_yields_once_before_it_syncs() {
        let gc = GroupCommit::new(0);
        let mut cx = Context::from_waker(Waker::noop());
        let syncs_asked = Cell::new(0);
        let counted = |_, _| {
            syncs_asked.set(syncs_asked.get() + 1);
            ready(Ok(()))
        };
        // A leads with a sync that never ends; B and C park behind it.
        let mut a = Box::pin(gc.wait(100, false, || 100, |_, _| std::future::pending()));
        assert!(a.as_mut().poll(&mut cx).is_pending());
        let mut b = pin!(gc.wait(200, false, || 300, counted));
        assert!(b.as_mut().poll(&mut cx).is_pending());
        let mut c = pin!(gc.wait(300, false, || 300, counted));
        assert!(c.as_mut().poll(&mut cx).is_pending());
        // A goes away: B leads, with C parked, so it yields first...
        drop(a);
        assert!(b.as_mut().poll(&mut cx).is_pending());
        assert_eq!(syncs_asked.get(), 0);
        // ...then one sync covers everything written, C's record too.
        assert!(matches!(b.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!(syncs_asked.get(), 1);
        assert!(matches!(c.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
        assert_eq!((gc.durable(), gc.syncs()), (300, 1));
    }

    #[test]
    fn a_writer_told_of_company_yields_once_and_its_sync_covers_the_next() {
        // One connection's pipelined requests: the first is read with the
        // second already buffered, so nobody is parked yet, but its caller
        // says company is coming.
        let gc = GroupCommit::new(0);
        let mut cx = Context::from_waker(Waker::noop());
        let written = Cell::new(100);
        let synced = Cell::new(Vec::new());
        let sync = |from, to| {
            let mut s = synced.take();
            s.push((from, to));
            synced.set(s);
            ready(Ok(()))
        };
        let mut first = pin!(gc.wait(100, true, || written.get(), sync));
        assert!(
            first.as_mut().poll(&mut cx).is_pending(),
            "a writer told of company synced at once, alone"
        );
        // The second request appends and parks behind the leader.
        written.set(200);
        let mut second = pin!(gc.wait(200, false, || written.get(), sync));
        assert!(second.as_mut().poll(&mut cx).is_pending());
        assert!(first.as_mut().poll(&mut cx).is_ready());
        assert!(second.as_mut().poll(&mut cx).is_ready());
        assert_eq!(synced.take(), vec![(0, 200)], "one sync covers both");
        assert_eq!(gc.syncs(), 1);
    }
}
