//! sluice-node: name server, broker and controller, generic over the disk,
//! clock and transport seams, and the `sluice-node` binary.
//!
//! Nothing is implemented yet; see the node issue.
