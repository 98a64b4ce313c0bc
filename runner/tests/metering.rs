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
