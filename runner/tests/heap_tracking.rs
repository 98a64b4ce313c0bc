//! Heap tracking (runner/src/instrument.rs, "Heap pages written"): an execution is undone, and
//! kept, by copying only the heap pages it wrote. Every test here runs with the full check on
//! (`check_heap_tracking`): after each execution the runner compares the whole heap with its
//! committed image and panics at the first page that differs, so a write the map missed (a store,
//! a bulk operation, a host copy) fails the test. On top, each test reads the heap back through
//! the canister to see the values an undone execution wrote are gone and a kept one's stay.

mod common;
use common::{code, decode, unit};

use candid::Principal;
use stablebench_canister::{Batch, Cost, Error, IndexProgress, KvBackend};
use stablebench_runner::canister::{check_heap_tracking, default_controller, Canister, Code, Limits, Options, Reject};
use stablebench_runner::host::Trap;
use stablebench_runner::instrument::Metering;

/// Stores of every width at page boundaries, `memory.fill` and `memory.copy` across pages, a
/// host copy (`msg_arg_data_copy`), growth, and `r`, which replies with 16 bytes at the address
/// its argument names. `*_trap` variants write the same, then trap.
const MODULE: &str = r#"(module
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (memory 2)
  (func $writes (param $v i32)
    ;; an i32 across the boundary of pages 0 and 1, an i64 across 2/3, f64 and i32.store8 inside
    (i32.store offset=4094 (i32.const 0) (local.get $v))
    (i64.store (i32.const 0x2ffc) (i64.extend_i32_u (local.get $v)))
    (f64.store (i32.const 0x4000) (f64.convert_i32_u (local.get $v)))
    (i32.store8 (i32.const 0x5fff) (local.get $v))
    ;; fill pages 8 and 9 (0x8ff0 .. 0x9010), copy them to 0xa000 (pages 10, 11)
    (memory.fill (i32.const 0x8ff0) (local.get $v) (i32.const 0x20))
    (memory.copy (i32.const 0xaff0) (i32.const 0x8ff0) (i32.const 0x20))
    ;; the host writes the argument at 0xc000 (page 12)
    (call $arg_copy (i32.const 0xc000) (i32.const 0) (call $arg_size)))
  (func (export "canister_update w") (call $writes (i32.const 7)) (call $reply))
  (func (export "canister_update w_trap") (call $writes (i32.const 9)) unreachable)
  (func (export "canister_query q") (call $writes (i32.const 11)) (call $reply))
  (func (export "canister_update grow")
    (drop (memory.grow (i32.const 1)))
    (i32.store (i32.const 0x20000) (i32.const 5))
    (i32.store (i32.const 0x100) (i32.const 5))
    (call $reply))
  (func (export "canister_update grow_trap")
    (drop (memory.grow (i32.const 1)))
    (i32.store (i32.const 0x100) (i32.const 6))
    unreachable)
  (func (export "canister_query r")
    (call $arg_copy (i32.const 0xfff0) (i32.const 0) (i32.const 4))
    (call $append (i32.load (i32.const 0xfff0)) (i32.const 16))
    (call $reply)))"#;

fn tiny() -> Canister {
    check_heap_tracking(true);
    let wasm = wat::parse_str(MODULE).expect("valid wat");
    let code = Code::new(&wasm, Metering::On).expect("instruments and compiles");
    assert!(code.info.tracks_heap, "the module is tracked");
    Canister::install(code, &[], Options::default()).expect("installs").0
}

fn read(c: &mut Canister, at: u32) -> Vec<u8> {
    c.query("r", &at.to_le_bytes(), Principal::anonymous()).result.expect("r replies")
}

/// The bytes at the places `$writes` writes, in a fixed order.
fn written(c: &mut Canister) -> Vec<Vec<u8>> {
    [4090, 0x2ff8, 0x4000, 0x5ff8, 0x8ff0, 0x9000, 0xaff0, 0xb000, 0xc000, 0x100, 0x1_fff0]
        .into_iter()
        .map(|at| read(c, at))
        .collect()
}

#[test]
fn undone_executions_leave_the_heap_as_it_was_and_kept_ones_stay() {
    let mut c = tiny();
    let fresh = written(&mut c);
    assert!(fresh.iter().all(|b| b.iter().all(|x| *x == 0)), "a fresh heap is zero");

    // A trapped update and a query write everything and leave nothing.
    let out = c.update("w_trap", b"host-written", Principal::anonymous());
    assert!(matches!(out.result, Err(Reject::Trapped(Trap::Canister(_)))), "{:?}", out.result);
    assert_eq!(written(&mut c), fresh);
    c.query("q", b"host-written", Principal::anonymous()).result.expect("q replies");
    assert_eq!(written(&mut c), fresh);

    // A kept update stays, and the undone ones after it go back to it, not to zero.
    c.update("w", b"kept", Principal::anonymous()).result.expect("w replies");
    let kept = written(&mut c);
    assert_ne!(kept, fresh);
    assert_eq!(&kept[8][..4], b"kept", "the host's copy is kept");
    assert_eq!(kept[0][4..8], 7u32.to_le_bytes(), "the store across pages 0 and 1");
    assert!(kept[4][..].iter().all(|b| *b == 7) && kept[6][..].iter().all(|b| *b == 7), "fill and copy");
    let out = c.update("w_trap", b"undone", Principal::anonymous());
    assert!(out.result.is_err());
    assert_eq!(written(&mut c), kept);

    // Growth: an undone grow leaves the heap at its size and content; a kept one adds the page.
    let before = c.heap_bytes();
    assert!(c.update("grow_trap", &[], Principal::anonymous()).result.is_err());
    assert_eq!((c.heap_bytes(), written(&mut c)), (before, kept.clone()));
    c.update("grow", &[], Principal::anonymous()).result.expect("grow replies");
    assert_eq!(c.heap_bytes(), before + 65_536);
    let grown = written(&mut c);
    assert_eq!(&grown[9][..4], &5u32.to_le_bytes());
    // And the heap after an upgrade-free restart from the saved state is the same.
    let dir = std::env::temp_dir().join(format!("stablebench-heap-tracking-{}", std::process::id()));
    c.save(&dir).expect("saves");
    let mut loaded = Canister::load(&dir, false).expect("loads");
    assert_eq!(written(&mut loaded), grown);
    let _ = std::fs::remove_dir_all(&dir);
}

fn update<R: candid::CandidType + serde::de::DeserializeOwned>(c: &mut Canister, method: &str, arg: &[u8]) -> R {
    decode(c.update(method, arg, default_controller()), method)
}

/// The production canister under the full check: loads, queries, a trapped update, an upgrade
/// and the key-value stores, every execution compared with the committed image.
#[test]
fn the_canister_runs_its_endpoints_with_every_execution_checked() {
    check_heap_tracking(true);
    assert!(code().info.tracks_heap, "the production wasm is tracked");
    // A low update limit, so that a load traps in the middle of its transaction (below).
    let limits = Limits { update: 200_000_000, ..Limits::PRODUCTION };
    let (mut c, _) = Canister::install(code(), &unit(), Options { limits, ..Options::default() }).expect("installs");
    let r: Result<Cost, Error> = update(&mut c, "create_schema", &unit());
    r.unwrap();
    let r: Result<IndexProgress, Error> = update(&mut c, "create_indexes", &candid::encode_one(None::<u64>).unwrap());
    assert!(r.unwrap().complete);
    let b: Result<Batch, Error> = update(&mut c, "add_users", &candid::encode_args((0u64, 2_000u64)).unwrap());
    assert_eq!(b.unwrap().next_offset, 2_000);
    let b: Result<Batch, Error> = update(&mut c, "add_orders", &candid::encode_args((0u64, 5_000u64)).unwrap());
    assert_eq!(b.unwrap().next_offset, 5_000);
    let stats = |c: &mut Canister| -> stablebench_canister::Stats {
        decode::<Result<_, Error>>(c.query("stats", &unit(), Principal::anonymous()), "stats").unwrap()
    };
    let before = stats(&mut c);
    // An update the instruction limit stops in the middle of its transaction: all undone.
    let out = c.update("add_users", &candid::encode_args((2_000u64, 100_000u64)).unwrap(), default_controller());
    assert_eq!(out.result, Err(Reject::Trapped(Trap::OutOfInstructions)));
    assert_eq!(stats(&mut c), before);
    let upgraded = c.upgrade(code(), &unit());
    assert!(upgraded.result.is_ok(), "{:?}", upgraded.result);
    let after = stats(&mut c);
    assert_eq!((after.users, after.orders, after.indexes), (before.users, before.orders, before.indexes));
    for kb in [KvBackend::Sqlite, KvBackend::StableBTreeMap, KvBackend::HeapBTreeMap] {
        for i in 0..20u8 {
            let out = c.update(
                "kv_put",
                &candid::encode_args((
                    kb,
                    serde_bytes::ByteBuf::from(vec![i; 32]),
                    serde_bytes::ByteBuf::from(vec![i; 100]),
                ))
                .unwrap(),
                default_controller(),
            );
            decode::<Result<Cost, Error>>(out, "kv_put").unwrap();
        }
        let bad = c.update(
            "kv_put",
            &candid::encode_args((kb, serde_bytes::ByteBuf::from(vec![0u8; 3]), serde_bytes::ByteBuf::new())).unwrap(),
            default_controller(),
        );
        assert!(decode::<Result<Cost, Error>>(bad, "kv_put").is_err(), "a 3-byte key is refused");
    }
    let upgraded = c.upgrade(code(), &unit());
    assert!(upgraded.result.is_ok(), "{:?}", upgraded.result);
    let len: Result<u64, Error> = decode(
        c.query("kv_len", &candid::encode_one(KvBackend::HeapBTreeMap).unwrap(), default_controller()),
        "kv_len",
    );
    assert_eq!(len.unwrap(), 20);
}

/// The heap pages counted by faults (`stablebench_runner::faults`, the default on Linux) are
/// the pages the module's marks count, call for call, on the production canister under the ic
/// model: a load, indexes, queries, each key-value backend, an update that traps in its
/// transaction, an upgrade. The grid's committed results, recorded with the marks, check the
/// same on every benchmark (`scripts/test.sh`, `--noise-threshold 0`).
#[test]
fn faults_count_the_pages_the_marks_count_call_for_call() {
    use stablebench_runner::instrument::{PageCounting, Tracking};
    use stablebench_runner::replica::CostModel;
    if PageCounting::on() != PageCounting::Faults {
        eprintln!("this platform counts pages by marks only: nothing to compare");
        return;
    }
    // Both undo their updates and queries by the map of written pages, checked here too.
    check_heap_tracking(true);
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench.wasm");
    let limits = Limits { update: 200_000_000, ..Limits::PRODUCTION };
    let opts = Options { limits, cost_model: CostModel::Ic, ..Options::default() };
    let mut canisters = [PageCounting::Marks, PageCounting::Faults].map(|pages| {
        let code = Code::from_file_tracked(path.as_ref(), Metering::On, Tracking { heap: true, pages }).expect("loads");
        Canister::install(code, &unit(), opts.clone()).expect("installs").0
    });
    let kv = |kb: KvBackend, i: u8| {
        candid::encode_args((kb, serde_bytes::ByteBuf::from(vec![i; 32]), serde_bytes::ByteBuf::from(vec![i; 100])))
            .unwrap()
    };
    let mut calls: Vec<(&str, Vec<u8>)> = vec![
        ("create_schema", unit()),
        ("create_indexes", candid::encode_one(None::<u64>).unwrap()),
        ("add_users", candid::encode_args((0u64, 2_000u64)).unwrap()),
        ("add_orders", candid::encode_args((0u64, 5_000u64)).unwrap()),
        ("q_stats", unit()),
        // Stopped by the limit in the middle of its transaction: undone.
        ("add_users", candid::encode_args((2_000u64, 100_000u64)).unwrap()),
        ("q_stats", unit()),
    ];
    for kb in [KvBackend::Sqlite, KvBackend::StableBTreeMap, KvBackend::HeapBTreeMap] {
        calls.extend((0..5).map(|i| ("kv_put", kv(kb, i))));
        calls.push(("q_kv_len", candid::encode_one(kb).unwrap()));
    }
    let mut counted = 0;
    for (method, arg) in &calls {
        let [marks, faults] = canisters.each_mut().map(|c| match method.strip_prefix("q_") {
            Some(q) => c.query(q, arg, default_controller()),
            None => c.update(method, arg, default_controller()),
        });
        assert_eq!(faults.result, marks.result, "{method}: the same reply");
        assert_eq!(faults.pages, marks.pages, "{method}: the same pages");
        assert_eq!(faults.instructions, marks.instructions, "{method}: the same instructions");
        counted += faults.pages.heap_accessed;
    }
    let [marks, faults] = canisters.each_mut().map(|c| {
        let code = c.code().clone();
        c.upgrade(code, &unit())
    });
    assert_eq!((faults.pages, faults.instructions), (marks.pages, marks.instructions), "upgrade");
    assert!(counted > 100, "the calls touched {counted} heap pages: enough to compare");
}
