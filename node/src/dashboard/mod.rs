//! The web dashboard under `/` on the node's HTTP port: cluster, topics,
//! groups, messages, timers and open transactions, server-rendered HTML
//! (only the live chart needs JavaScript).
//!
//! It is a client like any other: every figure and every change goes
//! through the wire to the name server and brokers, so the wire's ACL
//! decides. With ACL on, a session first logs in with an access key and
//! secret key, kept server-side in the session, and every wire call of
//! that session is signed with them. Every change is a POST carrying the
//! session's CSRF token; the session cookie is `HttpOnly` and
//! `SameSite=Strict`.
//!
//! Module map: [`session`] (sessions, cookie, CSRF), [`html`] (escaping,
//! layout, forms), `wire` (requests the admin API lacks), and one module
//! per page: `cluster`, `topics`, `groups`, `messages`, `timers`.

mod cluster;
mod groups;
pub mod html;
mod messages;
pub mod session;
mod timers;
mod topics;
mod wire;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use sluice_client::{Admin, ClientConfig, ClientInstance};
use sluice_core::{Clock, SystemClock};
use sluice_net::TlsTransport;

use html::{csrf_field, error_box, layout};
use session::{cookie_id, set_cookie, token_eq, Session, Sessions, WireAdmin};

/// Reads a figure of the broker serving this port in process (the wire's
/// runtime info lacks it): the bytes written but not yet dispatched.
pub type LocalFigure = Arc<dyn Fn() -> u64 + Send + Sync>;

/// What the dashboard needs from the node.
pub struct DashboardConfig {
    /// The name servers it asks, as any client does.
    pub namesrv_addrs: Vec<String>,
    /// The node's transport (TLS when the node dials TLS).
    pub transport: TlsTransport,
    /// Whether the broker enforces ACL: then sessions log in first.
    pub acl_on: bool,
    /// Where the HTTP port listens.
    pub http_listen: String,
    /// Where the broker in this process listens.
    pub broker_listen: String,
    /// The local broker's dispatch lag reader.
    pub dispatch_behind: Option<LocalFigure>,
}

impl DashboardConfig {
    /// Whether the dashboard serves: with ACL off it would hand anyone who
    /// reaches the HTTP port what the wire gives unsigned clients, so it
    /// serves only when the HTTP port is on loopback or the broker's own
    /// port is already open beyond it.
    pub fn serves(&self) -> bool {
        let loopback = |listen: &str| {
            crate::config_file::require_acl_beyond_loopback(listen, false, "").is_ok()
        };
        self.acl_on || loopback(&self.http_listen) || !loopback(&self.broker_listen)
    }
}

/// A response that ends a request early (boxed: it is large).
type Reject = Box<Response>;

/// The dashboard's shared state.
pub(crate) struct Dash {
    config: DashboardConfig,
    clock: SystemClock,
    /// [`DashboardConfig::serves`].
    serves: bool,
    sessions: Mutex<Sessions>,
    /// The unsigned client every session uses when ACL is off.
    anon: Arc<WireAdmin>,
    /// Per topic: the last (wall ms, summed max offsets) seen, for TPS.
    samples: Mutex<BTreeMap<String, (u64, i64)>>,
}

/// A request's session, ready to render or act.
pub(crate) struct Ctx {
    /// The client of this session.
    pub admin: Arc<WireAdmin>,
    /// The session's CSRF token.
    pub csrf: String,
    /// The logged-in access key.
    pub user: Option<String>,
    cookie: Option<String>,
}

impl Ctx {
    /// A 200 page.
    pub fn page(&self, title: &str, body: &str) -> Response {
        self.page_with(StatusCode::OK, title, body)
    }

    /// A page with `status`.
    pub fn page_with(&self, status: StatusCode, title: &str, body: &str) -> Response {
        let html = layout(title, self.user.as_deref(), &self.csrf, body);
        respond(status, self.cookie.as_deref(), html)
    }
}

/// Locks a mutex, carrying on with the data if a panicking holder poisoned it.
fn lock<X>(m: &Mutex<X>) -> MutexGuard<'_, X> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An HTML response with the dashboard's headers.
fn respond(status: StatusCode, cookie: Option<&str>, html: String) -> Response {
    let mut r = (status, html).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self' 'unsafe-inline'; \
             style-src 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        h.insert(header::SET_COOKIE, v);
    }
    r
}

/// A 303 to `to`, setting `cookie` if given.
fn redirect(to: &str, cookie: Option<&str>) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    if let Some(v) = cookie.and_then(|c| HeaderValue::from_str(c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, text).into_response()
}

/// The dashboard's routes; merge them with the metrics router.
pub fn router(config: DashboardConfig) -> Router {
    let client = ClientInstance::new(
        config.transport.clone(),
        SystemClock::new(),
        client_config(&config.namesrv_addrs, "sluice-dashboard"),
    );
    let dash = Dash {
        anon: Arc::new(Admin::new(client)),
        serves: config.serves(),
        config,
        clock: SystemClock::new(),
        sessions: Mutex::new(Sessions::default()),
        samples: Mutex::new(BTreeMap::new()),
    };
    Router::new()
        .route("/", get(cluster::page))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/topics", get(topics::page))
        .route("/topics/create", post(topics::create))
        .route(
            "/topics/delete",
            get(topics::confirm_delete).post(topics::delete),
        )
        .route("/groups", get(groups::list))
        .route("/groups/{group}", get(groups::page))
        .route("/groups/{group}/reset", post(groups::reset))
        .route("/messages", get(messages::page))
        .route("/messages/resend", post(messages::resend))
        .route("/timers", get(timers::page))
        .with_state(Arc::new(dash))
}

fn client_config(namesrv_addrs: &[String], instance: &str) -> ClientConfig {
    ClientConfig::new(&namesrv_addrs.join(";")).with_instance_name(instance)
}

impl Dash {
    fn now_ms(&self) -> u64 {
        self.clock.wall_ms()
    }

    /// The request's session (a new one, with its cookie, if it has none).
    fn session(&self, headers: &HeaderMap) -> Result<(String, Session, Option<String>), Reject> {
        if !self.serves {
            return Err(Box::new(disabled()));
        }
        let now = self.now_ms();
        let mut sessions = lock(&self.sessions);
        if let Some(id) = cookie_of(headers) {
            if let Some(s) = sessions.get(id, now) {
                return Ok((id.to_owned(), s, None));
            }
        }
        match sessions.create(now) {
            Ok((id, s)) => {
                let cookie = set_cookie(&id);
                Ok((id, s, Some(cookie)))
            }
            Err(_) => Err(Box::new(plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cannot read /dev/urandom for a session id",
            ))),
        }
    }

    /// The context of a page view; with ACL on and no login, a redirect
    /// to the login form.
    fn page_ctx(&self, headers: &HeaderMap) -> Result<Ctx, Reject> {
        let (_, s, cookie) = self.session(headers)?;
        self.ctx(s, cookie)
    }

    fn ctx(&self, s: Session, cookie: Option<String>) -> Result<Ctx, Reject> {
        let admin = if self.config.acl_on {
            match s.admin {
                Some(a) => a,
                None => return Err(Box::new(redirect("/login", cookie.as_deref()))),
            }
        } else {
            Arc::clone(&self.anon)
        };
        Ok(Ctx {
            admin,
            csrf: s.csrf,
            user: s.user,
            cookie,
        })
    }

    /// The context of a POST: the session must exist and `form` must
    /// carry its CSRF token, else 403 and nothing is done.
    fn post_ctx(
        &self,
        headers: &HeaderMap,
        form: &BTreeMap<String, String>,
    ) -> Result<(String, Ctx), Reject> {
        if !self.serves {
            return Err(Box::new(disabled()));
        }
        let now = self.now_ms();
        let found = cookie_of(headers).and_then(|id| {
            lock(&self.sessions)
                .get(id, now)
                .map(|s| (id.to_owned(), s))
        });
        let Some((id, s)) = found else {
            return Err(Box::new(forbidden()));
        };
        let given = form.get("csrf").map_or("", String::as_str);
        if !token_eq(given, &s.csrf) {
            return Err(Box::new(forbidden()));
        }
        Ok((id, self.ctx(s, None)?))
    }
}

/// A POST whose form was read and whose session and CSRF token were
/// checked: the one gate every change passes through (a request that
/// fails it is answered before the handler runs).
pub(crate) struct Posted {
    /// The form's fields.
    pub form: BTreeMap<String, String>,
    /// The session's context.
    pub ctx: Ctx,
    /// The session's id.
    pub session: String,
}

impl axum::extract::FromRequest<Arc<Dash>> for Posted {
    type Rejection = Response;

    async fn from_request(
        request: axum::extract::Request,
        d: &Arc<Dash>,
    ) -> Result<Self, Self::Rejection> {
        let headers = request.headers().clone();
        let body = Bytes::from_request(request, d)
            .await
            .map_err(IntoResponse::into_response)?;
        let form = html::parse_form(&body);
        let (session, ctx) = d.post_ctx(&headers, &form).map_err(|r| *r)?;
        Ok(Self { form, ctx, session })
    }
}

fn disabled() -> Response {
    respond(
        StatusCode::FORBIDDEN,
        None,
        layout(
            "Dashboard disabled",
            None,
            "",
            &error_box(
                "The dashboard is off: ACL is off and this HTTP port listens beyond loopback \
                 while the broker does not. Turn ACL on, or listen on loopback.",
            ),
        ),
    )
}

fn forbidden() -> Response {
    respond(
        StatusCode::FORBIDDEN,
        None,
        layout(
            "Refused",
            None,
            "",
            &error_box("Refused: this form's CSRF token is missing or wrong. Reload the page and try again."),
        ),
    )
}

fn cookie_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(cookie_id)
}

async fn login_page(State(d): State<Arc<Dash>>, headers: HeaderMap) -> Response {
    if !d.config.acl_on {
        return redirect("/", None);
    }
    match d.session(&headers) {
        Ok((_, s, cookie)) => login_form(&s.csrf, cookie.as_deref(), None),
        Err(r) => *r,
    }
}

fn login_form(csrf: &str, cookie: Option<&str>, error: Option<&str>) -> Response {
    let body = format!(
        "{}<p>This broker enforces ACL: log in with an access key. Every request \
         the dashboard makes for you is signed with it, so the broker decides what you may see and do.</p>\
         <form method=post action=/login><fieldset>{}\
         <label>Access key <input name=access_key required autocomplete=username></label><br>\
         <label>Secret key <input name=secret_key type=password required autocomplete=current-password></label><br>\
         <button>Log in</button></fieldset></form>",
        error.map(error_box).unwrap_or_default(),
        csrf_field(csrf)
    );
    let status = if error.is_some() {
        StatusCode::UNAUTHORIZED
    } else {
        StatusCode::OK
    };
    respond(status, cookie, layout("Log in", None, csrf, &body))
}

async fn login(State(d): State<Arc<Dash>>, headers: HeaderMap, body: Bytes) -> Response {
    if !d.config.acl_on {
        return redirect("/", None);
    }
    let form = html::parse_form(&body);
    let now = d.now_ms();
    let Some(id) = cookie_of(&headers) else {
        return forbidden();
    };
    let Some(s) = lock(&d.sessions).get(id, now) else {
        return forbidden();
    };
    if !token_eq(form.get("csrf").map_or("", String::as_str), &s.csrf) {
        return forbidden();
    }
    let ak = form.get("access_key").map_or("", |s| s.trim());
    let sk = form.get("secret_key").map_or("", String::as_str);
    if ak.is_empty() || sk.is_empty() {
        return login_form(&s.csrf, None, Some("Both keys are required."));
    }
    let config =
        client_config(&d.config.namesrv_addrs, "sluice-dashboard").with_credentials(ak, sk);
    let client = ClientInstance::new(d.config.transport.clone(), SystemClock::new(), config);
    let admin = Arc::new(Admin::new(client));
    if let Err(e) = wire::check_keys(&admin).await {
        return login_form(&s.csrf, None, Some(&format!("Login refused: {e}")));
    }
    let logged = lock(&d.sessions).login(id, ak.to_owned(), admin, now);
    match logged {
        Ok((new_id, _)) => redirect("/", Some(&set_cookie(&new_id))),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read /dev/urandom for a session id",
        ),
    }
}

async fn logout(State(d): State<Arc<Dash>>, posted: Posted) -> Response {
    let removed = lock(&d.sessions).remove(&posted.session);
    if let Some(admin) = removed.and_then(|s| s.admin) {
        tokio::spawn(async move { admin.client().shutdown().await });
    }
    redirect(
        if d.config.acl_on { "/login" } else { "/" },
        Some(&format!(
            "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
            session::COOKIE
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(acl_on: bool, http: &str, broker: &str) -> DashboardConfig {
        DashboardConfig {
            namesrv_addrs: Vec::new(),
            transport: TlsTransport::default(),
            acl_on,
            http_listen: http.to_owned(),
            broker_listen: broker.to_owned(),
            dispatch_behind: None,
        }
    }

    #[test]
    fn without_acl_it_serves_no_further_than_the_broker_already_does() {
        assert!(config(false, "127.0.0.1:5557", "127.0.0.1:10911").serves());
        assert!(config(false, "localhost:5557", "127.0.0.1:10911").serves());
        assert!(!config(false, "0.0.0.0:5557", "127.0.0.1:10911").serves());
        assert!(config(false, "0.0.0.0:5557", "0.0.0.0:10911").serves());
        assert!(config(true, "0.0.0.0:5557", "127.0.0.1:10911").serves());
    }
}
