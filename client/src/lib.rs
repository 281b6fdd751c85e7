//! sluice-client: producer, consumers, admin API and the `sluice` CLI.
//!
//! Nothing is implemented yet; see the client issue.
