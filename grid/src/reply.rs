//! Candid replies whose type table is built once per type, not in every message (both canisters
//! reply with it from their `manual_reply` endpoints).
//!
//! ic-cdk encodes a reply with `candid::encode_one`, which builds the reply type's type table
//! (`TypeSerialize`: the type's Candid description, deduplicated through a `BTreeMap` of types)
//! before it writes the value. For the canisters' replies (`Result<Batch, Error>` and the like,
//! with the eight variants of the stablebench canister's `Error`) that table cost more
//! instructions than the rest of a one-row call (the endpoint table in the README). The table depends on the Rust type only, so
//! [`reply`] builds it the first time, keeps it, and writes each reply as `DIDL`, the kept table,
//! then the value: the same bytes `encode_one` writes (tested below). A query's heap changes are
//! discarded, so [`warm`] builds the tables of the query replies in an update (install, upgrade).
//!
//! Written here rather than taken from a crate: candid itself has no cache, and this uses only its
//! public serializers (`TypeSerialize`, `ValueSerializer`), pinned with the rest in Cargo.lock.

use std::any::TypeId;
use std::cell::RefCell;
use std::collections::BTreeMap;

use candid::ser::{TypeSerialize, ValueSerializer};
use candid::CandidType;

thread_local! {
    static HEADERS: RefCell<BTreeMap<TypeId, Vec<u8>>> = const { RefCell::new(BTreeMap::new()) };
}

/// `DIDL`, the type table and the argument list of a reply of type `T`.
fn header<T: CandidType>() -> Vec<u8> {
    // As `IDLBuilder::new` does: the type memo must not carry over from another encoding.
    candid::types::internal::env_clear();
    let mut types = TypeSerialize::new();
    types.push_type(&T::ty()).expect("a Rust reply type has a Candid type");
    types.serialize().expect("a Candid type table serializes");
    let mut bytes = b"DIDL".to_vec();
    bytes.extend_from_slice(types.get_result());
    bytes
}

/// The kept header of `T`, built if missing.
fn with_header<T: CandidType + 'static, R>(f: impl FnOnce(&[u8]) -> R) -> R {
    HEADERS.with_borrow_mut(|h| f(h.entry(TypeId::of::<T>()).or_insert_with(header::<T>)))
}

/// The Candid encoding of `value` as a one-value reply: what `candid::encode_one` returns, with
/// the type table built once.
pub fn reply<T: CandidType + 'static>(value: &T) -> Vec<u8> {
    let mut values = ValueSerializer::new();
    value.idl_serialize(&mut values).expect("a reply value serializes");
    with_header::<T, _>(|header| [header, values.get_result()].concat())
}

/// Builds and keeps the type table of `T` now (in an update, for the queries after it).
pub fn warm<T: CandidType + 'static>() {
    with_header::<T, _>(|_| ());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::vfs::Error;
    use crate::api::{Batch, Cost, Deleted};

    #[test]
    fn a_reply_is_byte_for_byte_what_encode_one_writes() {
        let batch = Batch { inserted: 3, next_offset: 7, complete: true, instructions: 123_456 };
        let errors = [
            Error::NotController { caller: candid::Principal::anonymous() },
            Error::InvalidArgument { message: "count must be at least 1".into() },
            Error::Storage { message: "no such table: kv".into() },
        ];
        // Twice each: the second reply uses the kept header.
        for _ in 0..2 {
            let ok: Result<Batch, Error> = Ok(batch);
            assert_eq!(reply(&ok), candid::encode_one(ok).unwrap());
            for e in &errors {
                let err: Result<Batch, Error> = Err(e.clone());
                assert_eq!(reply(&err), candid::encode_one(err).unwrap());
                let err: Result<Option<Vec<u8>>, Error> = Err(e.clone());
                assert_eq!(reply(&err), candid::encode_one(err).unwrap());
            }
            let d: Result<Deleted, Error> =
                Ok(Deleted { deleted: 1, next_order_id: 2, complete: false, instructions: 3 });
            assert_eq!(reply(&d), candid::encode_one(d).unwrap());
            let c: Result<Cost, Error> = Ok(Cost { instructions: 9 });
            assert_eq!(reply(&c), candid::encode_one(c).unwrap());
            let v: Result<Option<Vec<u8>>, Error> = Ok(Some(vec![1, 2, 3]));
            assert_eq!(reply(&v), candid::encode_one(v).unwrap());
            assert_eq!(reply(&42u64), candid::encode_one(42u64).unwrap());
            assert_eq!(reply(&vec!["a".to_string()]), candid::encode_one(vec!["a".to_string()]).unwrap());
        }
    }
}
