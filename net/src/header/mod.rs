//! Typed request and response headers (spec §2) and their conversion to and
//! from `extFields`. Required fields must be present; unknown keys (such as
//! `AccessKey`, `Signature`, `OnsChannel`, `ns`, `nsd`, `bname`, `oway`,
//! `lo`) are ignored.

use crate::{ExtFields, Result};

mod admin;
mod consumer;
pub mod field;
mod namesrv;
mod offset;
mod pop;
mod pull;
mod query;
mod reply;
mod send;
mod transaction;

pub use admin::*;
pub use consumer::*;
pub use namesrv::*;
pub use offset::*;
pub use pop::*;
pub use pull::*;
pub use query::*;
pub use reply::*;
pub use send::*;
pub use transaction::*;

/// A typed header that flattens into a command's `extFields`.
pub trait CommandHeader: Sized {
    /// Writes every present field into `ext`.
    fn to_ext_fields(&self, ext: &mut ExtFields);
    /// Reads the header, failing with the name of the first missing or
    /// invalid required field.
    fn from_ext_fields(ext: &ExtFields) -> Result<Self>;
}

/// Declares a header struct whose fields map one-to-one onto `extFields`
/// keys. `Option` fields are optional on the wire; all others are required.
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty = $key:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::header::CommandHeader for $name {
            fn to_ext_fields(&self, ext: &mut $crate::ExtFields) {
                $( $crate::header::field::HeaderField::write(&self.$field, $key, ext); )*
            }
            // One pass over the entries (unique, so each field's slot is set
            // at most once) instead of one lookup per field; then the fields
            // are built in declaration order, so the first failure is the
            // same one a lookup per field would report.
            fn from_ext_fields(
                ext: &$crate::ExtFields,
            ) -> $crate::Result<Self> {
                $( let mut $field: Option<&str> = None; )*
                for (key, value) in ext.iter() {
                    match key {
                        $( $key => $field = Some(value), )*
                        _ => {}
                    }
                }
                Ok(Self {
                    $( $field: $crate::header::field::HeaderField::from_value($field, $key)?, )*
                })
            }
        }

        // The one-pass decode hands each key's value to a single field.
        const _: () = assert!(
            $crate::header::field::keys_unique($name::FIELDS),
            concat!(stringify!($name), " declares an extFields key twice"),
        );

        impl $name {
            /// The wire names of every field, in declaration order.
            pub const FIELDS: &'static [&'static str] = &[$($key),*];

            /// The decode before the one pass: a lookup per field, in
            /// declaration order (the reference the property tests hold
            /// `from_ext_fields` to).
            #[cfg(test)]
            #[allow(dead_code)]
            pub(crate) fn from_ext_fields_per_field(
                ext: &$crate::ExtFields,
            ) -> $crate::Result<Self> {
                Ok(Self {
                    $( $field: $crate::header::field::HeaderField::read(ext, $key)?, )*
                })
            }

            /// Builds a header from one random seed per field (property tests).
            #[cfg(test)]
            #[allow(dead_code)]
            pub(crate) fn from_seeds(seeds: &[$crate::header::field::sample::Seed]) -> Self {
                let mut it = seeds.iter();
                Self {
                    $( $field: $crate::header::field::sample::Sample::sample(
                        it.next().expect("invariant: one seed per field"),
                    ), )*
                }
            }
        }
    };
}
pub(crate) use command_header;

/// Converts a header to an `extFields` map (convenience for tests and callers).
pub fn to_map(header: &impl CommandHeader) -> ExtFields {
    let mut ext = ExtFields::new();
    header.to_ext_fields(&mut ext);
    ext
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::field::sample::seeds;
    use super::*;
    use crate::remoting::frame::{self, FrameLimits};
    use crate::remoting::{request_code, SerializeType};
    use crate::{Error, RemotingCommand};

    /// Round-trips a header through extFields and through a whole frame in
    /// both header encodings.
    fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(header: &H) {
        let ext = to_map(header);
        assert_eq!(&H::from_ext_fields(&ext).expect("decodes"), header);
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let mut cmd =
                RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(header);
            cmd.serialize_type = serialize_type;
            let bytes = frame::encode_to_bytes(&cmd, &FrameLimits::default()).expect("encodes");
            let (back, _) = frame::decode_slice(&bytes, &FrameLimits::default()).expect("decodes");
            assert_eq!(&back.header::<H>().expect("typed"), header);
        }
    }

    #[test]
    fn cpp_client_send_header_with_numeric_booleans_decodes() {
        // rocketmq-client-cpp 2.x sends unitMode/batch as "0"/"1".
        let ext: ExtFields = [
            ("a", "PG"),
            ("b", "TopicTest"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "1"),
            ("f", "0"),
            ("g", "1700000000000"),
            ("h", "0"),
            ("j", "0"),
            ("k", "0"),
            ("m", "1"),
        ]
        .into_iter()
        .collect();
        let h = SendMessageRequestHeaderV2::from_ext_fields(&ext).expect("decodes");
        assert_eq!((h.k, h.m), (Some(false), Some(true)));
        let mut bad = ext;
        bad.insert("k", "maybe");
        assert!(SendMessageRequestHeaderV2::from_ext_fields(&bad).is_err());
    }

    /// A field value: often a valid number or boolean, sometimes one that
    /// does not parse (overflow, stray text, empty).
    fn field_value() -> impl Strategy<Value = String> {
        prop_oneof![
            "-?[0-9]{1,20}",
            "(true|false|TRUE|False|0|1)",
            ".{0,8}",
            Just(String::new()),
        ]
    }

    /// `extFields` for a header with these keys: each field present or
    /// missing with any value, plus unknown keys (some colliding with field
    /// keys, some pushing the map past the size where lookups go binary).
    fn ext_fields_for(keys: &'static [&'static str]) -> impl Strategy<Value = ExtFields> {
        let fields =
            proptest::collection::vec(proptest::option::weighted(0.85, field_value()), keys.len());
        let extra = proptest::collection::vec(("[a-zA-Z_]{0,4}", field_value()), 0..12);
        (fields, extra, any::<bool>()).prop_map(move |(fields, extra, extra_last)| {
            let mut ext = ExtFields::new();
            let present = keys
                .iter()
                .zip(fields)
                .filter_map(|(key, value)| Some(((*key).to_owned(), value?)));
            if extra_last {
                ext.extend(present);
                ext.extend(extra);
            } else {
                ext.extend(extra);
                ext.extend(present);
            }
            ext
        })
    }

    macro_rules! round_trip_all {
        ($($ty:ident),* $(,)?) => {$(
            #[allow(non_snake_case)]
            mod $ty {
                use super::super::*;
                proptest! {
                    #![proptest_config(ProptestConfig::with_cases(64))]
                    #[test]
                    fn round_trips(s in seeds(crate::header::$ty::FIELDS.len())) {
                        check(&crate::header::$ty::from_seeds(&s));
                    }
                }
            }
        )*};
    }

    mod round_trip {
        round_trip_all!(
            SendMessageRequestHeader,
            SendMessageRequestHeaderV2,
            SendMessageResponseHeader,
            PullMessageRequestHeader,
            PullMessageResponseHeader,
            QueryConsumerOffsetRequestHeader,
            UpdateConsumerOffsetRequestHeader,
            QueueRequestHeader,
            SearchOffsetRequestHeader,
            OffsetResponseHeader,
            EarliestMsgStoretimeResponseHeader,
            QueryMessageRequestHeader,
            QueryMessageResponseHeader,
            ViewMessageRequestHeader,
            UnregisterClientRequestHeader,
            GetConsumerListByGroupRequestHeader,
            NotifyConsumerIdsChangedRequestHeader,
            ConsumerSendMsgBackRequestHeader,
            GetConsumerRunningInfoRequestHeader,
            ConsumeMessageDirectlyRequestHeader,
            EndTransactionRequestHeader,
            CheckTransactionStateRequestHeader,
            RegisterBrokerRequestHeader,
            RegisterBrokerResponseHeader,
            BrokerIdentityRequestHeader,
            QueryDataVersionResponseHeader,
            GetRouteInfoRequestHeader,
            GetTopicsByClusterRequestHeader,
            PutKvConfigRequestHeader,
            KvConfigKeyRequestHeader,
            GetKvConfigResponseHeader,
            CreateTopicRequestHeader,
            DeleteTopicRequestHeader,
            GetConsumeStatsRequestHeader,
        );
    }

    /// Every header's one-pass `from_ext_fields` returns what a lookup per
    /// field returns, error included (compared through `Debug`, as `Error`
    /// has no `PartialEq`).
    macro_rules! one_pass_all {
        ($($ty:ident),* $(,)?) => {$(
            #[allow(non_snake_case)]
            mod $ty {
                use super::super::*;
                proptest! {
                    #![proptest_config(ProptestConfig::with_cases(128))]
                    #[test]
                    fn matches_per_field_read(ext in ext_fields_for(crate::header::$ty::FIELDS)) {
                        use crate::header::$ty as H;
                        prop_assert_eq!(
                            format!("{:?}", H::from_ext_fields(&ext)),
                            format!("{:?}", H::from_ext_fields_per_field(&ext))
                        );
                    }
                }
            }
        )*};
    }

    mod one_pass {
        one_pass_all!(
            SendMessageRequestHeader,
            SendMessageRequestHeaderV2,
            SendMessageResponseHeader,
            ReplyMessageRequestHeader,
            PullMessageRequestHeader,
            PullMessageResponseHeader,
            QueryConsumerOffsetRequestHeader,
            UpdateConsumerOffsetRequestHeader,
            QueueRequestHeader,
            SearchOffsetRequestHeader,
            OffsetResponseHeader,
            EarliestMsgStoretimeResponseHeader,
            QueryMessageRequestHeader,
            QueryMessageResponseHeader,
            ViewMessageRequestHeader,
            UnregisterClientRequestHeader,
            GetConsumerListByGroupRequestHeader,
            NotifyConsumerIdsChangedRequestHeader,
            ConsumerSendMsgBackRequestHeader,
            GetConsumerRunningInfoRequestHeader,
            ConsumeMessageDirectlyRequestHeader,
            HeartbeatResponseHeader,
            EndTransactionRequestHeader,
            CheckTransactionStateRequestHeader,
            RegisterBrokerRequestHeader,
            RegisterBrokerResponseHeader,
            BrokerIdentityRequestHeader,
            QueryDataVersionResponseHeader,
            GetRouteInfoRequestHeader,
            GetTopicsByClusterRequestHeader,
            PutKvConfigRequestHeader,
            KvConfigKeyRequestHeader,
            GetKvConfigResponseHeader,
            CreateTopicRequestHeader,
            DeleteTopicRequestHeader,
            GetConsumeStatsRequestHeader,
            DeleteSubscriptionGroupRequestHeader,
            ResetOffsetRequestHeader,
            AclCheckRequestHeader,
            SluicePopReceiveRequestHeader,
            SluicePopReceiveResponseHeader,
            SluicePopAckRequestHeader,
            SluicePopRenewHeader,
        );
    }

    proptest! {
        #[test]
        fn send_v1_and_v2_carry_the_same_fields(s in seeds(SendMessageRequestHeader::FIELDS.len())) {
            let v1 = SendMessageRequestHeader::from_seeds(&s);
            let v2 = SendMessageRequestHeaderV2::from(v1.clone());
            let cmd = RemotingCommand::request(request_code::SEND_MESSAGE_V2).with_header(&v2);
            prop_assert_eq!(SendMessageRequestHeader::from_request(&cmd).expect("v2"), v1.clone());
            let cmd = RemotingCommand::request(request_code::SEND_MESSAGE).with_header(&v1);
            prop_assert_eq!(SendMessageRequestHeader::from_request(&cmd).expect("v1"), v1);
        }
    }

    #[test]
    fn missing_required_field_is_named() {
        let mut ext = to_map(&PullMessageRequestHeader::default());
        ext.remove("queueOffset");
        let err = PullMessageRequestHeader::from_ext_fields(&ext).expect_err("missing");
        assert!(matches!(
            err,
            Error::MissingField {
                field: "queueOffset"
            }
        ));
        assert_eq!(err.to_string(), "header field `queueOffset` is missing");
    }

    #[test]
    fn invalid_number_is_named_with_its_value() {
        let mut ext = to_map(&QueueRequestHeader::default());
        ext.insert("queueId", "x1");
        let err = QueueRequestHeader::from_ext_fields(&ext).expect_err("invalid");
        assert!(
            matches!(err, Error::InvalidField { field: "queueId", ref value } if value == "x1")
        );
    }

    #[test]
    fn unknown_and_vendor_keys_are_ignored() {
        let mut ext = to_map(&GetRouteInfoRequestHeader {
            topic: "T".into(),
            accept_standard_json_only: None,
        });
        for key in [
            "AccessKey",
            "Signature",
            "OnsChannel",
            "ns",
            "nsd",
            "bname",
            "oway",
            "lo",
            "zzz",
        ] {
            ext.insert(key, "x");
        }
        let header = GetRouteInfoRequestHeader::from_ext_fields(&ext).expect("tolerant");
        assert_eq!(header.topic, "T");
    }

    #[test]
    fn send_response_always_carries_region_and_trace_switch() {
        let ext = to_map(&SendMessageResponseHeader::new("ID", 1, 2));
        assert_eq!(ext.get("MSG_REGION"), Some(DEFAULT_REGION));
        assert_eq!(ext.get("TRACE_ON"), Some("true"));
        assert_eq!(ext.get("queueOffset"), Some("2"));
    }
}
