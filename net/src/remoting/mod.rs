//! The RocketMQ remoting protocol: frames, commands, both header encodings,
//! and the request/response code tables.

pub mod binary_header;
mod command;
mod ext_fields;
pub mod frame;
mod json_fast;
pub mod json_header;
mod language;
pub mod request_code;
pub mod response_code;

pub use command::{RemotingCommand, SerializeType, FLAG_ONEWAY, FLAG_RESPONSE, SLUICE_VERSION};
pub use ext_fields::ExtFields;
pub use frame::FrameLimits;
pub use language::LanguageCode;
