//! Fuzz target: arbitrary `extFields` (NUL-separated key, value, key,
//! value, ... read as lossy UTF-8) through every typed header's decoder.
//! Nothing may panic, and a header that decodes must survive a round trip
//! through `extFields` unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_net::header::*;
use sluice_net::ExtFields;

fn round_trip<H: CommandHeader + PartialEq + std::fmt::Debug>(ext: &ExtFields) {
    if let Ok(header) = H::from_ext_fields(ext) {
        let mut again = ExtFields::new();
        header.to_ext_fields(&mut again);
        let decoded = H::from_ext_fields(&again).expect("a re-encoded header decodes");
        assert_eq!(decoded, header);
    }
}

macro_rules! every_header {
    ($ext:expr; $($h:ty),* $(,)?) => { $( round_trip::<$h>($ext); )* };
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let mut ext = ExtFields::new();
    while let (Some(key), Some(value)) = (parts.next(), parts.next()) {
        ext.insert(key, value);
    }
    every_header!(&ext;
        AclCheckRequestHeader, BrokerIdentityRequestHeader, CheckTransactionStateRequestHeader,
        ConsumeMessageDirectlyRequestHeader, ConsumerSendMsgBackRequestHeader,
        CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
        EarliestMsgStoretimeResponseHeader, EndTransactionRequestHeader,
        GetConsumeStatsRequestHeader, GetConsumerListByGroupRequestHeader,
        GetConsumerRunningInfoRequestHeader, GetKvConfigResponseHeader, GetRouteInfoRequestHeader,
        GetTopicsByClusterRequestHeader, HeartbeatResponseHeader, KvConfigKeyRequestHeader,
        NotifyConsumerIdsChangedRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
        PullMessageResponseHeader, PutKvConfigRequestHeader, QueryConsumerOffsetRequestHeader,
        QueryDataVersionResponseHeader, QueryMessageRequestHeader, QueryMessageResponseHeader,
        QueueRequestHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
        ReplyMessageRequestHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
        SendMessageRequestHeader, SendMessageResponseHeader, UnregisterClientRequestHeader,
        UpdateConsumerOffsetRequestHeader, ViewMessageRequestHeader,
    );
    // The V2 send header (single-letter keys) and its conversion.
    let mut cmd = sluice_net::RemotingCommand::request(310);
    cmd.ext_fields = ext;
    let _ = SendMessageRequestHeader::from_request(&cmd);
});
