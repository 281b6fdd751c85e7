//! Fuzz target: arbitrary bytes as a stored CommitLog record, a batch body,
//! a properties string, a message id and a unique key. Nothing may panic;
//! properties that parse must encode to a string that parses to the same.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sluice_core::message::{
    decode_batch, decode_offset_msg_id, decode_uniq_key, stored_record, Properties, StoredRecord,
};

fuzz_target!(|data: &[u8]| {
    let bytes = Bytes::copy_from_slice(data);
    if let Ok(record) = StoredRecord::decode_unchecked_crc(&bytes) {
        assert!(record.total_size as usize <= data.len());
        let _ = record.parsed_properties();
        let _ = record.transaction_type();
    }
    let _ = StoredRecord::decode(&bytes);
    let _ = stored_record::peek_head(data);
    let _ = stored_record::stored_phys_offset(data);
    let _ = stored_record::stored_queue_offset(data);
    let _ = stored_record::stored_store_timestamp_ms(data);
    let _ = decode_batch(&bytes);
    if let Ok(props) = Properties::parse(data) {
        let again = Properties::parse(&props.encode()).expect("encoded properties parse");
        assert_eq!(
            again.iter().collect::<Vec<_>>(),
            props.iter().collect::<Vec<_>>()
        );
        let _ = props.tags();
        let _ = props.uniq_key();
    }
    let text = String::from_utf8_lossy(data);
    let _ = decode_offset_msg_id(&text);
    let _ = decode_uniq_key(&text);
});
