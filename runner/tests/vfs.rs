//! End-to-end tests of the ic-sqlite-vfs canister: the production wasm
//! (`target/canister/stablebench_vfs.wasm`, built by `scripts/build.sh vfs`) through the offline
//! runner: writes, the errors that change nothing, and an upgrade that keeps every row.

mod common;
use common::{decode, unit, vfs_code};

use candid::Principal;
use serde_bytes::ByteBuf;
use stablebench_grid::api::vfs::{Error, MAX_VALUE_BYTES};
use stablebench_grid::api::Cost;
use stablebench_runner::canister::{default_controller, Canister, Options};

fn key(i: u32) -> ByteBuf {
    let mut k = [0u8; 32];
    k[..4].copy_from_slice(&i.to_be_bytes());
    k[31] = 0xa5;
    ByteBuf::from(k.to_vec())
}

fn value(i: u32, round: u32) -> ByteBuf {
    ByteBuf::from(format!("value {i} of round {round};").repeat(1 + (i % 40) as usize).into_bytes())
}

fn put(c: &mut Canister, k: &ByteBuf, v: &ByteBuf, caller: Principal) -> Result<Cost, Error> {
    decode(c.update("kv_put", &candid::encode_args((k, v)).unwrap(), caller), "kv_put")
}

fn get(c: &mut Canister, k: &ByteBuf) -> Option<ByteBuf> {
    decode::<Result<Option<ByteBuf>, Error>>(
        c.query("kv_get", &candid::encode_one(k).unwrap(), Principal::anonymous()),
        "kv_get",
    )
    .expect("kv_get")
}

fn len(c: &mut Canister) -> u64 {
    decode::<Result<u64, Error>>(c.query("kv_len", &unit(), Principal::anonymous()), "kv_len").expect("kv_len")
}

#[test]
fn writes_survive_an_upgrade_and_refused_calls_change_nothing() {
    let mut c = Canister::install(vfs_code(), &unit(), Options::default()).expect("installs").0;
    assert_eq!(len(&mut c), 0, "a fresh canister has no table yet");
    assert_eq!(get(&mut c, &key(1)), None);
    const N: u32 = 150;
    for i in 0..N {
        let cost = put(&mut c, &key(i), &value(i, 0), default_controller()).expect("a controller's put");
        assert!(cost.instructions > 0);
    }
    // Overwrites replace, they do not add.
    for i in (0..N).step_by(7) {
        put(&mut c, &key(i), &value(i, 1), default_controller()).expect("an overwrite");
    }
    let expected = |i: u32| value(i, u32::from(i.is_multiple_of(7)));
    assert_eq!(len(&mut c), u64::from(N));

    // Refused calls: each returns its error and leaves every row as it was.
    let stranger = Principal::from_slice(&[7; 29]);
    assert!(
        matches!(put(&mut c, &key(N), &value(N, 0), stranger), Err(Error::NotController { caller }) if caller == stranger)
    );
    let short = ByteBuf::from(vec![1u8; 31]);
    assert!(matches!(put(&mut c, &short, &value(0, 0), default_controller()), Err(Error::InvalidArgument { .. })));
    let huge = ByteBuf::from(vec![0u8; MAX_VALUE_BYTES + 1]);
    assert!(matches!(put(&mut c, &key(N), &huge, default_controller()), Err(Error::InvalidArgument { .. })));
    assert!(matches!(
        decode::<Result<Option<ByteBuf>, Error>>(
            c.query("kv_get", &candid::encode_one(&short).unwrap(), Principal::anonymous()),
            "kv_get"
        ),
        Err(Error::InvalidArgument { .. })
    ));
    assert_eq!(len(&mut c), u64::from(N));
    assert_eq!(get(&mut c, &key(N)), None);

    // An upgrade keeps every row (the library's image in its virtual memory, MemoryId 120).
    let out = c.upgrade(vfs_code(), &unit());
    assert!(out.result.is_ok(), "upgrade: {:?}", out.result);
    assert_eq!(len(&mut c), u64::from(N));
    for i in 0..N {
        assert_eq!(get(&mut c, &key(i)), Some(expected(i)), "key {i} after the upgrade");
    }
    // And writing goes on after it.
    put(&mut c, &key(N), &value(N, 2), default_controller()).expect("a put after the upgrade");
    assert_eq!(get(&mut c, &key(N)), Some(value(N, 2)));
    assert_eq!(len(&mut c), u64::from(N) + 1);
}
