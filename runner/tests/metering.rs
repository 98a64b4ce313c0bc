//! Pins the runner's instruction accounting with hand-written modules whose costs are derived by
//! hand from the replica's rules (docs/sources.md). Each expected number
//! is written as the sum it comes from.

use candid::Principal;
use stablebench_runner::canister::{Canister, Code, Limits, Options, Reject};
use stablebench_runner::host::Trap;
use stablebench_runner::instrument::Metering;

const IMPORTS: &str = r#"
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (import "ic0" "debug_print" (func $print (param i32 i32)))
  (import "ic0" "performance_counter" (func $pc (param i32) (result i64)))
  (import "ic0" "time" (func $time (result i64)))
  (import "ic0" "is_controller" (func $is_controller (param i32 i32) (result i32)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_size" (func $ssize (result i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
  (import "ic0" "trap" (func $trap (param i32 i32)))
"#;

fn canister(body: &str, limits: Limits) -> Canister {
    let wat = format!("(module {IMPORTS} (memory 1) {body})");
    let wasm = wat::parse_str(&wat).expect("valid wat");
    let code = Code::new(&wasm, Metering::On).expect("instruments and compiles");
    let opts = Options { limits, ..Options::default() };
    Canister::install(code, &[], opts).expect("installs").0
}

fn cost(body: &str, method: &str) -> u64 {
    let mut c = canister(body, Limits::PRODUCTION);
    c.update(method, &[], Principal::anonymous()).instructions
}

#[test]
fn straight_line_code_costs_one_per_op_plus_function_entry() {
    let body = r#"(func (export "canister_update m") i32.const 1 i32.const 2 i32.add drop)"#;
    assert_eq!(cost(body, "m"), 1 + 1 + 1 + 1 + 1);
}

#[test]
fn division_float_and_global_ops_use_the_replica_table() {
    let body = r#"(global $g (mut i32) (i32.const 0))
      (func (export "canister_update m")
        i32.const 7 i32.const 2 i32.div_u global.set $g
        f64.const 1 f64.const 3 f64.div f64.sqrt drop
        global.get $g drop)"#;
    // entry 1; consts 1+1, div_u 10, global.set 2; consts 1+1, f64.div 5, f64.sqrt 8, drop 1;
    // global.get 2, drop 1.
    assert_eq!(cost(body, "m"), 1 + (1 + 1 + 10 + 2) + (1 + 1 + 5 + 8 + 1) + (2 + 1));
}

#[test]
fn a_loop_charges_its_body_on_every_iteration() {
    let body = r#"(func (export "canister_update m") (local $i i32)
        i32.const 10 local.set $i
        (loop $l
          local.get $i i32.const 1 i32.sub local.tee $i br_if $l))"#;
    // Entry block: 1 + const + set = 3 (loop costs 0). Body: get, const, sub, tee (4) + br_if 2
    // = 6, run 10 times. After the loop only `end`s (0).
    assert_eq!(cost(body, "m"), 3 + 10 * 6);
}

#[test]
fn if_and_else_charge_only_the_branch_taken() {
    let body = r#"
      (func (export "canister_update then") i32.const 1
        (if (then i32.const 7 drop) (else i32.const 8 drop i32.const 9 drop)))
      (func (export "canister_update else") i32.const 0
        (if (then i32.const 7 drop) (else i32.const 8 drop i32.const 9 drop)))"#;
    // Entry: 1 + const + if 2 = 4. Then-branch: const + drop (+ else 0) = 2. Else-branch: 4.
    assert_eq!(cost(body, "then"), 4 + 2);
    assert_eq!(cost(body, "else"), 4 + 4);
}

#[test]
fn calls_cost_five_and_the_callee_pays_its_entry() {
    let body = r#"(func $f (result i32) i32.const 5)
      (func (export "canister_update m") call $f drop call $f drop)"#;
    // Caller: 1 + (call 5 + drop 1) * 2 = 13. Callee: 1 + const 1 = 2, twice.
    assert_eq!(cost(body, "m"), 13 + 2 * 2);
}

#[test]
fn bulk_memory_charges_100_plus_the_size() {
    let body = r#"
      (func (export "canister_update fill") i32.const 0 i32.const 0 i32.const 1000 memory.fill)
      (func (export "canister_update copy") i32.const 0 i32.const 100 i32.const 500 memory.copy)"#;
    // 1 + 3 consts + 100 static, + n at run time.
    assert_eq!(cost(body, "fill"), 1 + 3 + 100 + 1000);
    assert_eq!(cost(body, "copy"), 1 + 3 + 100 + 500);
}

#[test]
fn system_api_fees_are_fixed_plus_per_byte() {
    let body = r#"
      (func (export "canister_update size") call $arg_size drop)
      (func (export "canister_update caller") call $caller_size drop)
      (func (export "canister_update time") call $time drop)
      (func (export "canister_update reply")
        i32.const 0 i32.const 10 call $append call $reply)
      (func (export "canister_update print") i32.const 0 i32.const 5 call $print)
      (func (export "canister_update controller") i32.const 0 i32.const 1 call $is_controller drop)"#;
    // wasm: entry 1 + call 5 + drop 1; host 500 (msg_arg_data_size, msg_caller_size, time).
    assert_eq!(cost(body, "size"), 7 + 500);
    assert_eq!(cost(body, "caller"), 7 + 500);
    assert_eq!(cost(body, "time"), 7 + 500);
    // wasm: 1 + 2 consts + 2 calls; reply data leaves the canister: 500 + 50/byte; msg_reply 500.
    assert_eq!(cost(body, "reply"), (1 + 2 + 5 + 5) + (500 + 50 * 10) + 500);
    // debug_print of 5 bytes into an empty 4 KiB log: 100 + len + 2*len + 50*len
    // (the replica's wasm_debug_print_instructions_charging: 3 + 5 + 100 + bytes).
    assert_eq!(cost(body, "print"), 3 + 5 + 100 + (5 + 2 * 5 + 50 * 5));
    // is_controller: 1000 + size (a 1-byte principal: byte 0x00 of the zeroed heap).
    assert_eq!(cost(body, "controller"), (1 + 2 + 5 + 1) + 1000 + 1);
}

#[test]
fn performance_counter_reads_the_prepaid_block_plus_its_own_fee() {
    // The whole method is one basic block, prepaid at entry: the first read already includes
    // every op of the block and its own 200; the second read adds only its 200.
    let body = r#"(func (export "canister_query m") (local $a i64)
        i32.const 0 call $pc local.set $a
        i32.const 0 i32.const 0 call $pc local.get $a i64.sub i64.store
        i32.const 8 local.get $a i64.store
        i32.const 0 i32.const 16 call $append call $reply)"#;
    let mut c = canister(body, Limits::PRODUCTION);
    let out = c.query("m", &[], Principal::anonymous());
    let reply = out.result.expect("replies");
    let diff = u64::from_le_bytes(reply[0..8].try_into().unwrap());
    let first = u64::from_le_bytes(reply[8..16].try_into().unwrap());
    assert_eq!(diff, 200, "an empty measured region costs the closing read's 200");
    // Block: entry 1; const, call 5, set (7); const, const, call 5, get, sub, store (10);
    // const, get, store (3); const, const, call 5, call 5 (12) = 33.
    assert_eq!(first, 33 + 200);
    // Whole message: the block, two reads, 16 bytes appended (500 + 800), msg_reply 500.
    assert_eq!(out.instructions, 33 + 200 + 200 + (500 + 50 * 16) + 500);
}

#[test]
fn stable_writes_pay_per_byte_and_per_newly_dirtied_page_per_message() {
    let body = r#"
      (func (export "canister_update grow") i64.const 1 call $sgrow drop)
      (func (export "canister_update write_twice")
        i64.const 0 i64.const 0 i64.const 100 call $swrite
        i64.const 200 i64.const 0 i64.const 100 call $swrite)
      (func (export "canister_update write_span")
        i64.const 4000 i64.const 0 i64.const 5000 call $swrite)
      (func (export "canister_update read")
        i64.const 0 i64.const 0 i64.const 3000 call $sread
        call $ssize drop)"#;
    let mut c = canister(body, Limits::PRODUCTION);
    let anon = Principal::anonymous();
    // 1 + const + call 5 + drop; stable64_grow 100.
    assert_eq!(c.update("grow", &[], anon).instructions, 8 + 100);
    // wasm 1 + 2 * (3 consts + call 5); first write dirties page 0: 20 + 100 + 1000; the second
    // write lands on the same page in the same message: 20 + 100.
    assert_eq!(c.update("write_twice", &[], anon).instructions, 17 + (20 + 100 + 1000) + (20 + 100));
    // A new message: bytes 4000..9000 touch pages 0, 1 and 2, all fresh in this message.
    assert_eq!(c.update("write_span", &[], anon).instructions, 9 + 20 + 5000 + 3 * 1000);
    // Reads: 20 + len, no page fee; stable64_size is free but for the call.
    assert_eq!(c.update("read", &[], anon).instructions, (1 + 3 + 5 + 5 + 1) + 20 + 3000);
}

#[test]
fn out_of_instructions_traps_and_changes_nothing() {
    let body = r#"(global $g (mut i32) (i32.const 0))
      (func (export "canister_update spin")
        i32.const 1 global.set $g
        (loop $l br $l))
      (func (export "canister_query get")
        i32.const 0 global.get $g i32.store
        i32.const 0 i32.const 4 call $append call $reply)"#;
    let limits = Limits { update: 10_000, ..Limits::PRODUCTION };
    let mut c = canister(body, limits);
    let out = c.update("spin", &[], Principal::anonymous());
    assert_eq!(out.result, Err(Reject::Trapped(Trap::OutOfInstructions)));
    assert!(out.instructions > 10_000, "stopped past the limit, at a loop-head check");
    let g = c.query("get", &[], Principal::anonymous()).result.unwrap();
    assert_eq!(g, 0i32.to_le_bytes(), "the global set before the loop was rolled back");
}

#[test]
fn host_fees_can_exhaust_the_limit_too() {
    let body = r#"(func (export "canister_update m") i32.const 0 i32.const 3000 call $print)"#;
    let limits = Limits { update: 1_000, ..Limits::PRODUCTION };
    let mut c = canister(body, limits);
    let out = c.update("m", &[], Principal::anonymous());
    assert_eq!(out.result, Err(Reject::Trapped(Trap::OutOfInstructions)));
}

#[test]
fn a_trapped_update_and_every_query_leave_heap_globals_and_stable_memory_unchanged() {
    let body = r#"(global $g (mut i32) (i32.const 0))
      (func $bump
        i32.const 1 global.set $g
        i32.const 64 i32.const 7 i32.store
        i64.const 0 i64.const 64 i64.const 4 call $swrite)
      (func $state
        i32.const 0 global.get $g i32.store
        i32.const 4 i32.const 64 i32.load i32.store
        i64.const 8 i64.const 0 i64.const 4 call $sread
        i32.const 0 i32.const 12 call $append call $reply)
      (func (export "canister_init") i64.const 1 call $sgrow drop)
      (func (export "canister_update bump_and_trap") call $bump i32.const 0 i32.const 0 call $trap)
      (func (export "canister_query bump") call $bump call $state)
      (func (export "canister_update bump_ok") call $bump call $state)
      (func (export "canister_query state") call $state)"#;
    let mut c = canister(body, Limits::PRODUCTION);
    let anon = Principal::anonymous();
    let zero = vec![0u8; 12];
    let out = c.update("bump_and_trap", &[], anon);
    assert!(matches!(out.result, Err(Reject::Trapped(Trap::Canister(_)))), "{:?}", out.result);
    assert_eq!(c.query("state", &[], anon).result.unwrap(), zero, "trapped update left no trace");
    let inside = c.query("bump", &[], anon).result.unwrap();
    assert_eq!(inside[..4], [1, 0, 0, 0], "the query saw its own change");
    assert_eq!(c.query("state", &[], anon).result.unwrap(), zero, "the query left no trace");
    let after = c.update("bump_ok", &[], anon).result.unwrap();
    assert_eq!(after, [1, 0, 0, 0, 7, 0, 0, 0, 7, 0, 0, 0]);
    assert_eq!(c.query("state", &[], anon).result.unwrap(), after, "a successful update persists");
}

#[test]
fn an_upgrade_keeps_stable_memory_and_discards_the_heap() {
    let body = r#"(global $g (mut i32) (i32.const 0))
      (func (export "canister_init") i64.const 1 call $sgrow drop)
      (func (export "canister_update set")
        i32.const 5 global.set $g
        i32.const 0 i32.const 9 i32.store
        i64.const 0 i64.const 0 i64.const 4 call $swrite
        i32.const 0 i32.const 0 call $append call $reply)
      (func (export "canister_query state")
        i32.const 4 global.get $g i32.store
        i64.const 8 i64.const 0 i64.const 4 call $sread
        i32.const 0 i32.const 12 call $append call $reply)"#;
    let mut c = canister(body, Limits::PRODUCTION);
    let anon = Principal::anonymous();
    c.update("set", &[], anon).result.unwrap();
    assert_eq!(c.query("state", &[], anon).result.unwrap(), [9, 0, 0, 0, 5, 0, 0, 0, 9, 0, 0, 0]);
    let code = c.code().clone();
    c.upgrade(code, &[]).result.unwrap();
    // Heap and globals start afresh (0), stable memory still holds 9.
    assert_eq!(c.query("state", &[], anon).result.unwrap(), [0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0]);
}

#[test]
fn unknown_imports_fail_with_their_names() {
    let wat = r#"(module (import "ic0" "no_such_api" (func)) (import "env" "other" (func))
      (func (export "canister_update m")))"#;
    let err = Code::new(&wat::parse_str(wat).unwrap(), Metering::On).err().expect("refused");
    let msg = format!("{err:#}");
    assert!(msg.contains("ic0.no_such_api") && msg.contains("env.other"), "{msg}");
}

#[test]
fn a_start_function_runs_at_install_with_metering() {
    let body = r#"(global $g (mut i32) (i32.const 0))
      (func $start i32.const 3 global.set $g)
      (start $start)
      (func (export "canister_query get")
        i32.const 0 global.get $g i32.store
        i32.const 0 i32.const 4 call $append call $reply)"#;
    let wat = format!("(module {IMPORTS} (memory 1) {body})");
    let code = Code::new(&wat::parse_str(&wat).unwrap(), Metering::On).unwrap();
    let (mut c, out) = Canister::install(code, &[], Options::default()).unwrap();
    assert_eq!(out.instructions, 1 + 1 + 2, "start: entry, const, global.set");
    assert_eq!(c.query("get", &[], Principal::anonymous()).result.unwrap(), [3, 0, 0, 0]);
}

#[test]
fn an_upgrade_to_a_module_that_cannot_instantiate_keeps_the_canister_and_its_stable_memory() {
    let body = r#"
      (func (export "canister_init") i64.const 1 call $sgrow drop
        i64.const 0 i64.const 0 i64.const 4 call $swrite)
      (func (export "canister_query state")
        i64.const 16 i64.const 0 i64.const 4 call $sread
        i32.const 16 i32.const 4 call $append call $reply)"#;
    let mut c = canister(&format!("(data (i32.const 0) \"\\2a\"){body}"), Limits::PRODUCTION);
    let anon = Principal::anonymous();
    assert_eq!(c.query("state", &[], anon).result.unwrap(), [42, 0, 0, 0]);
    // Valid wasm, but its data segment lies past its one-page memory: instantiation fails.
    let broken = format!("(module {IMPORTS} (memory 1) (data (i32.const 70000) \"x\") {body})");
    let code = Code::new(&wat::parse_str(&broken).unwrap(), Metering::On).expect("validates and compiles");
    let out = c.upgrade(code, &[]);
    assert!(matches!(out.result, Err(Reject::Trapped(_))), "{:?}", out.result);
    assert_eq!(c.query("state", &[], anon).result.unwrap(), [42, 0, 0, 0], "stable memory survived");
}

// ---------------------------------------------------------------------------------------------
// The memory tracker (the `ic` cost model; docs/mainnet.md, `replica::memory_tracker`): per
// 64 KiB Wasm page of heap or stable memory, 80,000 at its first access in an execution and
// 80,000 more at its first write; a plain query pays for accesses only. Each case runs the same
// module under both models: the pages are counted by hand, the canbench model's count is the
// one without page tracking, and the ic model's is that plus the pages' fees.

mod memory_tracker {
    use super::*;
    use stablebench_runner::canister::Outcome;
    use stablebench_runner::host::PageCounts;
    use stablebench_runner::instrument::{PageCounting, Tracking};
    use stablebench_runner::replica::memory_tracker::{ACCESS_FEE, WRITE_FEE};
    use stablebench_runner::replica::CostModel;

    fn install(body: &str, model: CostModel, pages: PageCounting) -> Canister {
        let wat = format!("(module {IMPORTS} (memory 8) {body})");
        let wasm = wat::parse_str(&wat).expect("valid wat");
        let code = Code::with_tracking(&wasm, Metering::On, Tracking { heap: true, pages }).expect("compiles");
        let opts = Options { cost_model: model, ..Options::default() };
        Canister::install(code, &[], opts).expect("installs").0
    }

    /// The ways this platform counts pages: the module's marks always, and the faults of the
    /// protected heap where the runner counts by faults (`stablebench_runner::faults`). Every
    /// case runs under each and must give the same counts.
    fn ways() -> Vec<PageCounting> {
        let mut ways = vec![PageCounting::Marks];
        if PageCounting::on() == PageCounting::Faults {
            ways.push(PageCounting::Faults);
        }
        ways
    }

    /// Runs `calls` (update unless the name starts with `q_`) on a fresh canister in each model
    /// (and without page tracking), with the pages counted each way ([`ways`]); checks that
    /// tracking changes no canbench count and that each ic count is the canbench one plus the
    /// fees of `expected[i]`; returns the ic outcomes of the last way.
    fn both(body: &str, calls: &[(&str, &[u8])], expected: &[PageCounts]) -> Vec<Outcome> {
        let mut last = Vec::new();
        for way in ways() {
            last = both_by(body, calls, expected, way);
        }
        last
    }

    fn both_by(body: &str, calls: &[(&str, &[u8])], expected: &[PageCounts], way: PageCounting) -> Vec<Outcome> {
        let run = |model, pages| {
            let mut c = install(body, model, pages);
            let anon = Principal::anonymous();
            calls
                .iter()
                .map(|(m, arg)| match m.strip_prefix("q_") {
                    Some(_) => c.query(m, arg, anon),
                    None => c.update(m, arg, anon),
                })
                .collect::<Vec<_>>()
        };
        let (plain, canbench, ic) =
            (run(CostModel::Canbench, PageCounting::Off), run(CostModel::Canbench, way), run(CostModel::Ic, way));
        for (i, (m, _)) in calls.iter().enumerate() {
            assert_eq!(plain[i].instructions, canbench[i].instructions, "{m}: page tracking changes no canbench count");
            assert_eq!(canbench[i].pages, expected[i], "{m}: pages (canbench model, {way:?})");
            assert_eq!(ic[i].pages, expected[i], "{m}: pages (ic model, {way:?})");
            let update = !m.starts_with("q_");
            // Without the canbench model's 1,000 per 4 KiB stable page written.
            let stable_fee = stablebench_runner::replica::DIRTY_PAGE_FEE * canbench[i].dirtied_pages;
            assert_eq!(
                ic[i].instructions,
                canbench[i].instructions - stable_fee + expected[i].fee(update),
                "{m}: the ic count is the canbench count plus the pages' fees ({way:?})"
            );
        }
        ic
    }

    fn heap(accessed: u64, written: u64) -> PageCounts {
        PageCounts { heap_accessed: accessed, heap_written: written, ..Default::default() }
    }

    #[test]
    fn the_fees_are_sixteen_os_pages_of_5000() {
        assert_eq!(ACCESS_FEE, 16 * 5_000);
        assert_eq!(WRITE_FEE, 16 * 5_000);
        assert_eq!(heap(2, 1).fee(true), 2 * 80_000 + 80_000);
        assert_eq!(heap(2, 1).fee(false), 2 * 80_000);
    }

    #[test]
    fn a_page_is_charged_at_its_first_read_and_again_at_its_first_write_only() {
        let body = r#"
          (func (export "canister_update read_twice")
            i32.const 70000 i32.load drop i32.const 131071 i32.load8_u drop)
          (func (export "canister_update read_then_write")
            i32.const 70000 i32.load drop i32.const 70004 i32.const 1 i32.store
            i32.const 70008 i32.const 1 i32.store)
          (func (export "canister_update write_only") i32.const 200000 i64.const 1 i64.store)
          (func (export "canister_update nothing"))"#;
        // Byte 70,000 and byte 131,071 are both in page 1: one access. Then a read and a write
        // of page 1; then a write to page 3, never read (both fees in one). Each message counts
        // afresh: page 1 again in the second.
        both(
            body,
            &[("read_twice", &[]), ("read_then_write", &[]), ("write_only", &[]), ("nothing", &[])],
            &[heap(1, 0), heap(1, 1), heap(1, 1), heap(0, 0)],
        );
    }

    #[test]
    fn an_access_across_a_wasm_page_boundary_touches_both_pages() {
        let body = r#"
          (func (export "canister_update load") i32.const 65532 i64.load align=1 drop)
          (func (export "canister_update store") i32.const 131070 i32.const 7 i32.store align=2)
          (func (export "canister_update offset") i32.const 0 i64.load offset=131069 align=1 drop)
          (func (export "canister_update lying_hint") i32.const 65532 i64.load drop)"#;
        // 65,532..65,539: pages 0 and 1. 131,070..131,073: pages 1 and 2, written. The static
        // offset counts: 131,069..131,076 is pages 1 and 2. An access whose alignment hint is
        // natural is taken at its word (see `instrument`, "Pages touched"): aligned, it cannot
        // cross a page, so only its first byte's page is marked; this one breaks its hint
        // (undefined behaviour in the Rust or C it would come from), and its second page goes
        // unseen by the marks: the one place they count fewer pages than the replica. Counted by
        // faults, as the replica counts, the access touches both.
        for way in ways() {
            let lying = if way == PageCounting::Faults { heap(2, 0) } else { heap(1, 0) };
            both_by(
                body,
                &[("load", &[]), ("store", &[]), ("offset", &[]), ("lying_hint", &[])],
                &[heap(2, 0), heap(2, 2), heap(2, 0), lying],
                way,
            );
        }
    }

    #[test]
    fn bulk_memory_touches_its_ranges() {
        let body = r#"
          (func (export "canister_update fill")
            i32.const 0 i32.const 9 i32.const 131073 memory.fill)
          (func (export "canister_update copy")
            i32.const 196608 i32.const 10 i32.const 10 memory.copy)
          (func (export "canister_update empty")
            i32.const 300000 i32.const 9 i32.const 0 memory.fill)"#;
        // 0..131,073 is pages 0, 1 and 2 (its last byte, 131,072, starts page 2). The copy reads
        // page 0 and writes page 3. An empty fill touches nothing.
        both(body, &[("fill", &[]), ("copy", &[]), ("empty", &[])], &[heap(3, 3), heap(2, 1), heap(0, 0)]);
    }

    #[test]
    fn stable_memory_is_tracked_like_the_heap_and_host_copies_touch_the_heap() {
        let body = r#"
          (func (export "canister_update grow") i64.const 3 call $sgrow drop)
          (func (export "canister_update write")
            i64.const 65530 i64.const 0 i64.const 10 call $swrite)
          (func (export "canister_update read")
            i64.const 262144 i64.const 0 i64.const 4 call $sread
            i64.const 327680 i64.const 4 i64.const 4 call $sread)
          (func (export "canister_update arg")
            i32.const 458752 i32.const 0 call $arg_size call $arg_copy)"#;
        let stable =
            |accessed, written| PageCounts { stable_accessed: accessed, stable_written: written, ..Default::default() };
        let sum = |a: PageCounts, b: PageCounts| a.plus(&b);
        // The write reads heap page 0 and writes stable bytes 65,530..65,539: stable pages 0 and
        // 1. The reads read stable page 0 (twice: once) and write heap pages 4 and 5. The
        // argument copy writes heap page 7. The canbench model's 1,000 per 4 KiB stable page
        // written is not charged under ic: checked separately below.
        let out = both(
            body,
            &[("grow", &[]), ("write", &[]), ("read", &[]), ("arg", b"DIDL\x00\x00")],
            &[heap(0, 0), sum(heap(1, 0), stable(2, 2)), sum(heap(2, 2), stable(1, 0)), heap(1, 1)],
        );
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn pages_a_message_grows_the_heap_by_are_tracked_like_the_others() {
        // The heap has 8 pages; the message grows it by 2 and writes the second new page, reads
        // the first: pages 9 (written) and 8 (read). Counted by faults, the new pages must come
        // protected (`faults::Creator`), not writable as wasmtime's own memories grow them.
        let body = r#"
          (func (export "canister_update grow_and_touch")
            i32.const 2 memory.grow drop
            i32.const 589830 i32.const 1 i32.store
            i32.const 524290 i32.load drop)
          (func (export "canister_update touch_again")
            i32.const 589830 i32.load drop)"#;
        both(body, &[("grow_and_touch", &[]), ("touch_again", &[])], &[heap(2, 1), heap(1, 0)]);
    }

    #[test]
    fn a_query_pays_for_accesses_only() {
        let body = r#"
          (func (export "canister_query q_write") i32.const 70000 i32.const 1 i32.store
            call $reply)"#;
        let out = both(body, &[("q_write", &[])], &[heap(1, 1)]);
        assert!(out[0].result.is_ok());
    }

    #[test]
    fn a_trapped_update_pays_for_what_it_touched_and_the_next_message_starts_afresh() {
        let body = r#"
          (func (export "canister_update trap")
            i32.const 70000 i32.const 1 i32.store unreachable)
          (func (export "canister_update write") i32.const 70000 i32.const 1 i32.store)"#;
        let out = both(body, &[("trap", &[]), ("write", &[])], &[heap(1, 1), heap(1, 1)]);
        assert!(matches!(out[0].result, Err(Reject::Trapped(_))));
    }

    #[test]
    fn the_stable_write_fee_is_the_canbench_models_only() {
        let body = r#"
          (func (export "canister_update grow") i64.const 1 call $sgrow drop)
          (func (export "canister_update write") i64.const 0 i64.const 0 i64.const 8192 call $swrite)"#;
        let anon = Principal::anonymous();
        for way in ways() {
            let mut canbench = install(body, CostModel::Canbench, way);
            let mut ic = install(body, CostModel::Ic, way);
            canbench.update("grow", &[], anon);
            ic.update("grow", &[], anon);
            let (c, i) = (canbench.update("write", &[], anon), ic.update("write", &[], anon));
            // Two 4 KiB stable pages at 1,000 each under canbench; under ic heap page 0 read,
            // stable page 0 read and written, and no 1,000s.
            let wasm_and_api = 1 + 3 + 5 + 20 + 8192;
            assert_eq!(c.instructions, wasm_and_api + 2 * 1_000, "{way:?}");
            assert_eq!(i.instructions, wasm_and_api + 2 * ACCESS_FEE + WRITE_FEE, "{way:?}");
        }
    }

    #[test]
    fn performance_counter_sees_the_charges_in_band_and_each_measured_step_counts_its_own_pages() {
        // Touches page 1, prints the measure line, reads the counter (a step starts: pages
        // counted afresh), touches pages 1 and 2, reads it again; touches page 3 (after the
        // step's last read: not the step's); a second step reads page 1 only.
        let body = r#"
          (data (i32.const 0) "stablebench: measure")
          (func (export "canister_update m") (local $a i64) (local $b i64)
            i32.const 70000 i32.load drop
            i32.const 0 i32.const 20 call $print
            i32.const 0 call $pc local.set $a
            i32.const 70000 i32.load drop
            i32.const 140000 i32.const 1 i32.store
            i32.const 0 call $pc local.set $b
            i32.const 200000 local.get $b local.get $a i64.sub i64.store
            i32.const 0 i32.const 20 call $print
            i32.const 0 call $pc drop
            i32.const 70000 i32.load drop
            i32.const 0 call $pc drop
            i32.const 200000 i32.const 8 call $append call $reply)"#;
        let anon = Principal::anonymous();
        for way in ways() {
            let run = |model| {
                let out = install(body, model, way).update("m", &[], anon);
                let step = u64::from_le_bytes(out.result.clone().expect("replies")[..8].try_into().unwrap());
                (out, step)
            };
            let ((canbench, step_canbench), (ic, step_ic)) = (run(CostModel::Canbench), run(CostModel::Ic));
            let first = PageCounts { heap_accessed: 2, heap_written: 1, ..Default::default() };
            let steps = first.plus(&heap(1, 0));
            assert_eq!(canbench.step_pages(), Some(steps), "{way:?}");
            assert_eq!(ic.step_pages(), Some(steps), "{way:?}");
            assert_eq!(step_ic, step_canbench + first.fee(true), "the counter includes the fees ({way:?})");
        }
    }
}
