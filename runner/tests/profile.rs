//! The profiler (`bench --profile`, runner/src/profile.rs) is exact and changes nothing: on
//! hand-written modules, every function's exclusive and inclusive instructions are derived by hand
//! from the replica's cost table (each expected number written as the sum it comes from, as in
//! tests/metering.rs); the exclusive counts add up to the message's instructions measured without
//! profiling; and a real benchmark reports the same numbers with and without profiling.

use candid::Principal;
use stablebench_runner::canbench::BenchResult;
use stablebench_runner::canister::{Canister, Code, Limits, Options, Outcome, Reject};
use stablebench_runner::host::Trap;
use stablebench_runner::instrument::Metering;
use stablebench_runner::profile::{bucket, Bucket, Names, Profile, BULK_NAME};

const MODULE: &str = r#"(module
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "performance_counter" (func $pc (param i32) (result i64)))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (memory 1)
  (func $leaf (result i32) i32.const 7)
  (func $mid (result i32) call $leaf call $leaf i32.add)
  (func $early (param i32) (result i32)
    local.get 0
    (if (result i32) (then i32.const 1 return) (else i32.const 2)))
  (func $via_br (result i32) i32.const 3 br 0)
  (func $rec (param i32)
    local.get 0
    (if (then local.get 0 i32.const 1 i32.sub call $rec)))
  (func $tail (result i32) return_call $leaf)
  (func $boom call $leaf drop unreachable)
  (func $m (export "canister_update m")
    call $mid drop
    i32.const 1 call $early drop
    call $via_br drop
    i32.const 2 call $rec
    call $tail drop
    call $reply)
  (func $t (export "canister_update t") call $mid drop call $boom)
  (func $fill i32.const 0 i32.const 0 i32.const 1000 memory.fill)
  (func $b (export "canister_update b") call $fill call $reply)
  (func $w (export "canister_update w")
    i32.const 0 call $pc drop
    call $mid drop
    i32.const 0 call $pc drop
    call $reply))"#;

fn wasm() -> Vec<u8> {
    wat::parse_str(MODULE).expect("valid wat")
}

fn run(metering: Metering, method: &str) -> (Outcome, Option<Profile>) {
    let code = Code::new(&wasm(), metering).expect("instruments and compiles");
    let (mut c, _) = Canister::install(code, &[], Options::default()).expect("installs");
    let out = c.update(method, &[], Principal::anonymous());
    (out, c.take_profile())
}

/// (exclusive, inclusive) of the function named `name`.
fn cost(tree: &stablebench_runner::profile::CallTree, names: &Names, name: &str) -> (u64, u64) {
    tree.functions()
        .iter()
        .find(|f| names.get(f.func) == name)
        .map(|f| (f.exclusive, f.inclusive))
        .unwrap_or_else(|| panic!("{name} is not in the profile"))
}

#[test]
fn a_profile_gives_each_function_its_hand_computed_exclusive_and_inclusive_cost() {
    let names = Names::from_wasm(&wasm()).unwrap();
    let (out, profile) = run(Metering::Profiled, "m");
    out.result.as_ref().expect("replies");
    let profile = profile.expect("profiled");
    let tree = profile.tree();
    // leaf: entry 1 + const 1; mid: entry 1 + call 5 + call 5 + add 1, plus two leaves.
    assert_eq!(cost(&tree, &names, "mid"), (12, 12 + 2 * 2));
    // leaf runs twice under mid and once through tail's return_call.
    assert_eq!(cost(&tree, &names, "leaf"), (3 * 2, 3 * 2));
    // early(1): entry 1 + local.get 1 + if 2; then-branch: const 1 + return 1.
    assert_eq!(cost(&tree, &names, "early"), (4 + 2, 4 + 2));
    // A branch to the function's own label leaves through its exit hook: 1 + const 1 + br 2.
    assert_eq!(cost(&tree, &names, "via_br"), (4, 4));
    // rec(2), rec(1): entry 1 + get 1 + if 2, then get 1 + const 1 + sub 1 + call 5; rec(0):
    // the entry block only. Recursion counts once in the inclusive cost.
    assert_eq!(cost(&tree, &names, "rec"), (2 * (4 + 8) + 4, 2 * (4 + 8) + 4));
    // tail: entry 1 + return_call 3; its callee runs after tail has left the stack.
    assert_eq!(cost(&tree, &names, "tail"), (4, 4));
    // m: entry 1 + (call 5 + drop 1) + (const 1 + call 5 + drop 1) + (call 5 + drop 1)
    // + (const 1 + call 5) + (call 5 + drop 1) + call 5, and msg_reply's fee of 500.
    let m_own = 1 + 6 + 7 + 6 + 6 + 6 + 5 + 500;
    let callees = 16 + 6 + 4 + 28 + 4 + 2;
    assert_eq!(cost(&tree, &names, "m"), (m_own, m_own + callees));
    assert_eq!(tree.total(), m_own + callees);
    assert_eq!(profile.unbalanced(), 0);
    assert_eq!(profile.mismatched(), 0);
    // Folded stacks: outermost first, the same path merged.
    let folded = tree.folded(&names);
    for line in ["m 537", "m;mid 12", "m;mid;leaf 4", "m;rec;rec;rec 4", "m;tail 4", "m;leaf 2", "m;via_br 4"] {
        assert!(folded.lines().any(|l| l == line), "{line:?} missing from\n{folded}");
    }
    let sum: u64 = folded.lines().map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap()).sum();
    assert_eq!(sum, tree.total());
    // The functions table: a header, then the same (exclusive, inclusive) per function.
    let tsv = tree.functions_tsv(&names);
    assert_eq!(tsv.lines().next(), Some("function\texclusive\tinclusive"));
    assert_eq!(tsv.lines().nth(1), Some(format!("m\t{m_own}\t{}", m_own + callees).as_str()));
    assert!(tsv.lines().any(|l| l == "mid\t12\t16"), "{tsv}");
    let exclusive: u64 = tsv.lines().skip(1).map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(exclusive, tree.total());
}

#[test]
fn the_per_byte_charge_of_bulk_memory_is_a_frame_of_its_own() {
    let names = Names::from_wasm(&wasm()).unwrap();
    let (out, profile) = run(Metering::Profiled, "b");
    out.result.as_ref().expect("replies");
    let tree = profile.expect("profiled").tree();
    // fill: entry 1 + 3 consts + memory.fill's fixed 100; its 1,000 bytes in the bulk frame.
    assert_eq!(cost(&tree, &names, "fill"), (1 + 3 + 100, 1 + 3 + 100 + 1000));
    assert_eq!(cost(&tree, &names, BULK_NAME), (1000, 1000));
    // b: entry 1 + call 5 + call 5, and msg_reply's 500.
    assert_eq!(cost(&tree, &names, "b"), (11 + 500, 11 + 500 + 1104));
    let folded = tree.folded(&names);
    assert!(folded.lines().any(|l| l == format!("b;fill;{BULK_NAME} 1000")), "{folded}");
    assert_eq!(bucket(BULK_NAME), Bucket::MemOps);
}

#[test]
fn the_exclusive_counts_add_up_to_the_instructions_measured_without_profiling() {
    for method in ["m", "t", "w", "b"] {
        let (plain, none) = run(Metering::On, method);
        assert!(none.is_none(), "no profile without profiling");
        let (profiled, profile) = run(Metering::Profiled, method);
        assert_eq!(profiled.instructions, plain.instructions, "{method}: profiling changed the count");
        assert_eq!(profiled.result, plain.result, "{method}: profiling changed the result");
        let profile = profile.expect("profiled");
        assert_eq!(profile.total(), plain.instructions, "{method}");
        let exclusive: u64 = profile.tree().functions().iter().map(|f| f.exclusive).sum();
        assert_eq!(exclusive, plain.instructions, "{method}");
    }
}

#[test]
fn a_trap_leaves_the_stack_open_and_the_profile_still_adds_up() {
    let names = Names::from_wasm(&wasm()).unwrap();
    let (out, profile) = run(Metering::Profiled, "t");
    assert!(matches!(out.result, Err(Reject::Trapped(Trap::Canister(_)))), "{:?}", out.result);
    let profile = profile.expect("profiled");
    let tree = profile.tree();
    // t: entry 1 + call 5 + drop 1 + call 5; boom: entry 1 + call 5 + drop 1 + unreachable 1.
    assert_eq!(cost(&tree, &names, "t"), (12, 12 + 16 + 8 + 2));
    assert_eq!(cost(&tree, &names, "boom"), (8, 8 + 2));
    assert_eq!(profile.total(), out.instructions);
    assert_eq!(out.instructions, 12 + 16 + 8 + 2);
    assert_eq!(profile.unbalanced(), 2, "t and boom never returned");
}

#[test]
fn a_measurement_between_two_performance_counter_calls_is_profiled_on_its_own() {
    let names = Names::from_wasm(&wasm()).unwrap();
    let (out, profile) = run(Metering::Profiled, "w");
    out.result.as_ref().expect("replies");
    let profile = profile.expect("profiled");
    // w's one block is prepaid at entry: 1 + (const 1 + call 5 + drop 1) * 2 + (call 5 + drop 1)
    // + call 5 = 26; the first read adds its 200, mid runs (16), the second read adds 200.
    assert_eq!(profile.marks(), [26 + 200, 26 + 200 + 16 + 200]);
    let measured = 16 + 200;
    assert_eq!(profile.window(measured), Some((0, 1)));
    let step = profile.step(measured).expect("found");
    assert_eq!(step.total(), measured);
    assert_eq!(cost(&step, &names, "w"), (200, 200 + 16));
    assert_eq!(cost(&step, &names, "mid"), (12, 16));
    assert_eq!(cost(&step, &names, "leaf"), (4, 4));
    assert!(profile.window(measured + 1).is_none());
}

#[test]
fn profiling_keeps_every_function_index_tables_starts_and_multi_value_working() {
    // call_indirect through an element segment, ref.func in a global, a start function, a
    // function with two results (its wrapper block needs a type of its own) and an exported
    // function index: every index moves by the two hook imports.
    let wat = r#"(module
      (import "ic0" "msg_reply" (func $reply))
      (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
      (memory 1)
      (type $ret_i32 (func (result i32)))
      (table 2 funcref)
      (elem (i32.const 0) $five $six)
      (global $g (mut i32) (i32.const 0))
      (global $r funcref (ref.func $six))
      (func $five (result i32) i32.const 5)
      (func $six (result i32) i32.const 6)
      (func $two (result i32 i32) i32.const 3 i32.const 4 return)
      (func $start i32.const 100 global.set $g)
      (start $start)
      (func (export "canister_update m")
        i32.const 0
        i32.const 1 call_indirect (type $ret_i32)
        call $two i32.add i32.add
        global.get $g i32.add
        i32.store
        i32.const 0 i32.const 4 call $append call $reply))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let mut outs = Vec::new();
    for metering in [Metering::On, Metering::Profiled] {
        let code = Code::new(&wasm, metering).expect("instruments and compiles");
        let (mut c, install) = Canister::install(code, &[], Options::default()).expect("installs");
        let out = c.update("m", &[], Principal::anonymous());
        let profile = c.take_profile();
        outs.push((install.instructions, out.instructions, out.result.clone()));
        if let Some(p) = profile {
            assert_eq!(p.total(), out.instructions);
            let names = Names::from_wasm(&wasm).unwrap();
            let folded = p.tree().folded(&names);
            assert!(folded.contains("func[6];six "), "{folded}");
            assert!(folded.contains("func[6];two "), "{folded}");
        }
    }
    assert_eq!(outs[0].2, Ok((6 + 3 + 4 + 100i32).to_le_bytes().to_vec()));
    assert_eq!(outs[0], outs[1], "profiling changed a count or a result");
}

#[test]
fn a_real_benchmark_reports_the_same_numbers_with_and_without_profiling() {
    let wasm = concat!(env!("CARGO_MANIFEST_DIR"), "/../target/canister/stablebench_bench.wasm");
    assert!(std::path::Path::new(wasm).exists(), "{wasm} is missing: run scripts/build.sh bench first");
    let bytes = std::fs::read(wasm).unwrap();
    // One benchmark measured as one interval (bench_fn with scopes), one as 50 (`calls` = 50).
    let benches = ["heap_btreemap_trie_upgrade_200", "stable_btreemap_trie_read_200_warm"];
    let mut runs = Vec::new();
    for metering in [Metering::On, Metering::Profiled] {
        let code = Code::new(&bytes, metering).expect("the benchmark wasm loads");
        let opts = Options { limits: Limits::BENCHMARK, ..Options::default() };
        let (mut c, _) = Canister::install(code, &[], opts).unwrap();
        for name in benches {
            let out =
                c.query(&format!("__canbench__{name}"), &candid::encode_args(()).unwrap(), Principal::anonymous());
            let result: BenchResult = candid::decode_one(out.result.as_ref().expect("replies")).unwrap();
            let profile = c.take_profile();
            runs.push((metering, name, out.instructions, result, profile));
        }
    }
    let (plain, profiled) = runs.split_at(benches.len());
    for ((_, name, instructions, result, none), (_, _, p_instructions, p_result, profile)) in plain.iter().zip(profiled)
    {
        assert!(none.is_none());
        assert_eq!(p_instructions, instructions, "{name}: the query's instructions");
        assert_eq!(p_result, result, "{name}: canbench's result (total and scopes)");
        let profile = profile.as_ref().expect("profiled");
        assert_eq!(profile.total(), *instructions, "{name}: the profile adds up to the query");
        assert_eq!(profile.unbalanced() + profile.mismatched(), 0, "{name}");
        let step = profile.step(result.total.instructions);
        if result.total.calls == 1 {
            let step = step.unwrap_or_else(|| panic!("{name}: the measured step is one interval"));
            assert_eq!(step.total(), result.total.instructions, "{name}");
        }
    }
}

#[test]
fn functions_fall_into_their_buckets_by_name() {
    let cases = [
        ("sqlite3VdbeExec", Bucket::Sqlite),
        ("balance", Bucket::Sqlite),
        ("unixepochFunc", Bucket::Sqlite),
        ("unixWrite", Bucket::Storage),
        ("__ic_custom_fd_pwrite", Bucket::Storage),
        ("gettimeofday", Bucket::Storage),
        ("ic_cdk::api::time", Bucket::Storage),
        ("stable_fs::fs::FileSystem<M>::write", Bucket::Storage),
        (
            "<ic_stable_structures::memory_manager::VirtualMemory<M> as ic_stable_structures::Memory>::write",
            Bucket::Storage,
        ),
        ("dlmalloc", Bucket::Allocator),
        ("sqlite3DbMallocRawNN", Bucket::Allocator),
        ("__rustc::__rdl_alloc", Bucket::Allocator),
        ("memcmp", Bucket::MemOps),
        ("strlen", Bucket::Other),
        ("rusqlite::statement::Statement::value_ref", Bucket::Other),
        ("canister_query __canbench__x", Bucket::Other),
        ("canister_query __canbench__x.command_export", Bucket::Other),
        ("func[12]", Bucket::Other),
    ];
    for (name, expected) in cases {
        assert_eq!(bucket(name), expected, "{name}");
    }
}

const PAGES_MODULE: &str = r#"(module
  (import "ic0" "msg_reply" (func $reply))
  (memory 4)
  ;; Reads page 1.
  (func $reader (result i32) i32.const 65536 i32.load)
  ;; Writes pages 2 and 3, and reads page 1 again (already touched: not its page).
  (func $writer
    i32.const 131072 i32.const 1 i32.store
    i32.const 196608 i32.const 2 i32.store
    i32.const 65540 i32.load drop)
  (func $m (export "canister_update m")
    call $reader drop
    call $writer
    ;; Page 0, by the exported function itself, after its callees returned.
    i32.const 8 i32.const 3 i32.store
    call $reply))"#;

/// `--profile-pages`: each Wasm page goes to the function that touched it first, accessed and
/// written apart, counted afresh in every message (the memory tracker's window), and attributing
/// changes no instruction count.
#[test]
fn each_page_is_attributed_to_the_function_that_touched_it_first() {
    use stablebench_runner::host::PageCounts;
    let wasm = wat::parse_str(PAGES_MODULE).expect("valid wat");
    let names = Names::from_wasm(&wasm).unwrap();
    let code = Code::new(&wasm, Metering::Profiled).expect("instruments and compiles");
    let (mut c, _) = Canister::install(code.clone(), &[], Options::default()).expect("installs");
    c.set_profile_pages(true);
    let heap = |accessed, written| PageCounts { heap_accessed: accessed, heap_written: written, ..Default::default() };
    for _ in 0..2 {
        let out = c.update("m", &[], Principal::anonymous());
        out.result.as_ref().expect("replies");
        let pages: Vec<(String, PageCounts)> =
            c.take_profile().expect("profiled").pages().into_iter().map(|(f, p)| (names.get(f), p)).collect();
        let expected = [("writer", heap(2, 2)), ("m", heap(1, 1)), ("reader", heap(1, 0))];
        assert_eq!(pages, expected.map(|(n, p)| (n.to_string(), p)), "the second message counts afresh too");
        assert_eq!(out.pages, heap(4, 3), "the message's own count is the sum");
    }
    // Off: no attribution, and the same instructions.
    let (mut plain, _) = Canister::install(code, &[], Options::default()).expect("installs");
    let (out, attributed) =
        (plain.update("m", &[], Principal::anonymous()), c.update("m", &[], Principal::anonymous()));
    assert!(plain.take_profile().expect("profiled").pages().is_empty());
    assert_eq!(out.instructions, attributed.instructions);
}

/// Two callers of an allocator, one through Rust's `Vec` growth: each `malloc` call takes the
/// next fresh page (a bump pointer), `free` writes one.
const SITES_MODULE: &str = r#"(module
  (import "ic0" "msg_reply" (func $reply))
  (memory 16)
  (global $next (mut i32) (i32.const 196608))
  ;; Writes the header of the next chunk: a page not touched before in the message.
  (func $malloc (result i32)
    global.get $next i32.const 1 i32.store
    global.get $next
    global.get $next i32.const 65536 i32.add global.set $next)
  (func $free (param i32) i32.const 655360 i32.const 0 i32.store)
  (func $alloc::raw_vec::RawVec::grow (result i32) call $malloc)
  ;; Asks through the Vec; touches page 1 itself.
  (func $a i32.const 65536 i32.load drop call $alloc::raw_vec::RawVec::grow drop)
  (func $b call $malloc call $free)
  (func $m (export "canister_update m")
    call $a
    call $b
    call $reply))"#;

/// `--profile-pages`' allocation sites: the pages an allocator function touched first go to the
/// nearest caller that is not Rust's container code, with the allocator function it entered; the
/// other functions' pages are not counted there.
#[test]
fn the_allocators_pages_go_to_the_call_that_asked() {
    use stablebench_runner::host::PageCounts;
    use stablebench_runner::profile::{allocation_sites, forwards_allocation};
    let wasm = wat::parse_str(SITES_MODULE).expect("valid wat");
    let names = Names::from_wasm(&wasm).unwrap();
    let code = Code::new(&wasm, Metering::Profiled).expect("instruments and compiles");
    let (mut c, _) = Canister::install(code, &[], Options::default()).expect("installs");
    c.set_profile_pages(true);
    let out = c.update("m", &[], Principal::anonymous());
    out.result.as_ref().expect("replies");
    let profile = c.take_profile().expect("profiled");
    let heap = |accessed, written| PageCounts { heap_accessed: accessed, heap_written: written, ..Default::default() };
    let sites: Vec<(String, String, PageCounts)> = allocation_sites(&profile, &names)
        .into_iter()
        .map(|(s, p)| (names.get(s.caller), names.get(s.entry), p))
        .collect();
    // Ties in function order (`malloc` is defined before `free`).
    let expected = [("a", "malloc", heap(1, 1)), ("b", "malloc", heap(1, 1)), ("b", "free", heap(1, 1))];
    assert_eq!(sites, expected.map(|(c, e, p)| (c.to_string(), e.to_string(), p)));
    // By function, `a`'s own read counts under `a`; the three allocator pages under theirs.
    let by_func: Vec<(String, PageCounts)> = profile.pages().into_iter().map(|(f, p)| (names.get(f), p)).collect();
    assert_eq!(
        by_func,
        [("malloc", heap(2, 2)), ("free", heap(1, 1)), ("a", heap(1, 0))].map(|(n, p)| (n.to_string(), p))
    );
    // Without passing through the Vec, `a`'s page names the Vec's growth.
    let direct = profile.pages_by_site(|f| names.get(f) == "malloc", |_| false);
    assert_eq!(names.get(direct[0].0.caller), "alloc::raw_vec::RawVec::grow");
    assert!(forwards_allocation("<alloc::vec::Vec<T> as core::clone::Clone>::clone"));
    assert!(forwards_allocation(
        "<core::iter::adapters::GenericShunt<I,R> as core::iter::traits::iterator::Iterator>::next"
    ));
    assert!(!forwards_allocation("alloc::collections::btree::map::BTreeMap<K,V,A>::insert"));
    assert!(!forwards_allocation("candid::de::IDLDeserialize::new_with_config"));
}
