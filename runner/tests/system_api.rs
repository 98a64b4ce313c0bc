//! The system API beyond what stablebench's own canister uses: every `ic0` import a canister
//! built with ic-cdk 0.18-0.20 may have loads; context rules, environment variables, per-execution
//! logging fees, calls and callbacks, timers, the wasm memory limit, the memory allocation, canbench's anonymous
//! controller and the saved state. Expected costs are written as the sums they come from
//! (fees in `stablebench_runner::replica`).

use candid::Principal;
use stablebench_runner::canister::{Canister, Code, Limits, Options, Reject};
use stablebench_runner::host::Trap;
use stablebench_runner::instrument::Metering;
use stablebench_runner::suite::{bench_options, read_env_vars, BenchSetup};

const IMPORTS: &str = r#"
  (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
  (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
  (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
  (import "ic0" "msg_reply" (func $reply))
  (import "ic0" "msg_reject_code" (func $reject_code (result i32)))
  (import "ic0" "msg_caller_size" (func $caller_size (result i32)))
  (import "ic0" "msg_caller_copy" (func $caller_copy (param i32 i32 i32)))
  (import "ic0" "is_controller" (func $is_controller (param i32 i32) (result i32)))
  (import "ic0" "canister_self_size" (func $self_size (result i32)))
  (import "ic0" "canister_self_copy" (func $self_copy (param i32 i32 i32)))
  (import "ic0" "debug_print" (func $print (param i32 i32)))
  (import "ic0" "global_timer_set" (func $timer_set (param i64) (result i64)))
  (import "ic0" "env_var_count" (func $env_count (result i32)))
  (import "ic0" "env_var_value_size" (func $env_value_size (param i32 i32) (result i32)))
  (import "ic0" "env_var_value_copy" (func $env_value_copy (param i32 i32 i32 i32 i32)))
  (import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
  (import "ic0" "call_data_append" (func $call_append (param i32 i32)))
  (import "ic0" "call_perform" (func $call_perform (result i32)))
  (import "ic0" "stable64_grow" (func $sgrow (param i64) (result i64)))
  (import "ic0" "stable64_write" (func $swrite (param i64 i64 i64)))
  (import "ic0" "stable64_read" (func $sread (param i64 i64 i64)))
"#;

fn code(body: &str) -> std::sync::Arc<Code> {
    let wat = format!("(module {IMPORTS} (memory 1) {body})");
    let wasm = wat::parse_str(&wat).expect("valid wat");
    Code::new(&wasm, Metering::On).expect("instruments and compiles")
}

fn canister_with(body: &str, opts: Options) -> Canister {
    Canister::install(code(body), &[], opts).expect("installs").0
}

fn canister(body: &str) -> Canister {
    canister_with(body, Options::default())
}

fn anon() -> Principal {
    Principal::anonymous()
}

#[test]
fn every_import_of_an_ic_cdk_0_18_to_0_20_canister_loads() {
    // What ic-cdk's `ic0` bindings declare beyond the calls above (timers, inter-canister calls,
    // cycles, certification, environment variables, cost queries).
    let wat = r#"(module
      (import "ic0" "msg_reject_code" (func (result i32)))
      (import "ic0" "msg_reject_msg_size" (func (result i32)))
      (import "ic0" "msg_reject_msg_copy" (func (param i32 i32 i32)))
      (import "ic0" "msg_method_name_size" (func (result i32)))
      (import "ic0" "msg_method_name_copy" (func (param i32 i32 i32)))
      (import "ic0" "accept_message" (func))
      (import "ic0" "msg_deadline" (func (result i64)))
      (import "ic0" "data_certificate_present" (func (result i32)))
      (import "ic0" "data_certificate_size" (func (result i32)))
      (import "ic0" "data_certificate_copy" (func (param i32 i32 i32)))
      (import "ic0" "certified_data_set" (func (param i32 i32)))
      (import "ic0" "msg_cycles_available" (func (result i64)))
      (import "ic0" "msg_cycles_available128" (func (param i32)))
      (import "ic0" "msg_cycles_refunded" (func (result i64)))
      (import "ic0" "msg_cycles_refunded128" (func (param i32)))
      (import "ic0" "msg_cycles_accept" (func (param i64) (result i64)))
      (import "ic0" "msg_cycles_accept128" (func (param i64 i64 i32)))
      (import "ic0" "canister_cycle_balance" (func (result i64)))
      (import "ic0" "canister_cycle_balance128" (func (param i32)))
      (import "ic0" "canister_liquid_cycle_balance128" (func (param i32)))
      (import "ic0" "cycles_burn128" (func (param i64 i64 i32)))
      (import "ic0" "mint_cycles128" (func (param i64 i64 i32)))
      (import "ic0" "root_key_size" (func (result i32)))
      (import "ic0" "root_key_copy" (func (param i32 i32 i32)))
      (import "ic0" "subnet_self_size" (func (result i32)))
      (import "ic0" "subnet_self_copy" (func (param i32 i32 i32)))
      (import "ic0" "cost_call" (func (param i64 i64 i32)))
      (import "ic0" "cost_create_canister" (func (param i32)))
      (import "ic0" "cost_http_request" (func (param i64 i64 i32)))
      (import "ic0" "cost_sign_with_ecdsa" (func (param i32 i32 i32 i32) (result i32)))
      (import "ic0" "cost_sign_with_schnorr" (func (param i32 i32 i32 i32) (result i32)))
      (import "ic0" "cost_vetkd_derive_key" (func (param i32 i32 i32 i32) (result i32)))
      (import "ic0" "env_var_count" (func (result i32)))
      (import "ic0" "env_var_name_size" (func (param i32) (result i32)))
      (import "ic0" "env_var_name_copy" (func (param i32 i32 i32 i32)))
      (import "ic0" "env_var_name_exists" (func (param i32 i32) (result i32)))
      (import "ic0" "env_var_value_size" (func (param i32 i32) (result i32)))
      (import "ic0" "env_var_value_copy" (func (param i32 i32 i32 i32 i32)))
      (import "ic0" "call_new" (func (param i32 i32 i32 i32 i32 i32 i32 i32)))
      (import "ic0" "call_on_cleanup" (func (param i32 i32)))
      (import "ic0" "call_data_append" (func (param i32 i32)))
      (import "ic0" "call_with_best_effort_response" (func (param i32)))
      (import "ic0" "call_cycles_add" (func (param i64)))
      (import "ic0" "call_cycles_add128" (func (param i64 i64)))
      (import "ic0" "call_perform" (func (result i32)))
      (import "ic0" "global_timer_set" (func (param i64) (result i64)))
      (import "ic0" "in_replicated_execution" (func (result i32)))
      (import "ic0" "canister_version" (func (result i64)))
      (import "ic0" "canister_status" (func (result i32)))
      (memory 1)
      (func (export "canister_update m")))"#;
    let wasm = wat::parse_str(wat).unwrap();
    let code = Code::new(&wasm, Metering::On).expect("every import is provided");
    let (mut c, _) = Canister::install(code, &[], Options::default()).unwrap();
    assert_eq!(c.update("m", &[], anon()).result, Err(Reject::DidNotReply));
}

#[test]
fn global_timer_set_traps_in_a_query_and_works_in_an_update() {
    let body = r#"(func $set i64.const 42 call $timer_set drop)
      (func (export "canister_query q") call $set call $reply)
      (func (export "canister_update u") call $set call $reply)"#;
    let mut c = canister(body);
    match c.query("q", &[], anon()).result {
        Err(Reject::Trapped(Trap::ContractViolation(m))) => {
            assert!(m.contains("global_timer_set") && m.contains("Query"), "{m}")
        }
        other => panic!("expected a contract violation, got {other:?}"),
    }
    assert_eq!(c.update("u", &[], anon()).result, Ok(Vec::new()));
    assert_eq!(c.timer(), 42);
}

#[test]
fn environment_variables_are_read_and_charged_like_the_replica() {
    let body = r#"(data (i32.const 0) "GREETING")
      (func (export "canister_update count") call $env_count drop call $reply)
      (func (export "canister_update greeting") (local $n i32)
        i32.const 0 i32.const 8 call $env_value_size local.set $n
        i32.const 0 i32.const 8 i32.const 100 i32.const 0 local.get $n call $env_value_copy
        i32.const 100 local.get $n call $append call $reply)
      (func (export "canister_update missing")
        i32.const 0 i32.const 3 call $env_value_size drop call $reply)"#;
    let opts = Options {
        env_vars: vec![("ZONE".into(), "eu".into()), ("GREETING".into(), "hello".into())],
        ..Options::default()
    };
    let mut c = canister_with(body, opts);
    // Entry 1, call 5, drop 1, call 5 (reply); fees: env_var_count 500, msg_reply 500.
    assert_eq!(c.update("count", &[], anon()).instructions, (1 + 5 + 1 + 5) + 500 + 500);
    assert_eq!(c.update("greeting", &[], anon()).result, Ok(b"hello".to_vec()));
    // "GRE" is not a variable: the replica traps.
    assert!(matches!(
        c.update("missing", &[], anon()).result,
        Err(Reject::Trapped(Trap::ContractViolation(m))) if m.contains("GRE")
    ));
}

#[test]
fn a_print_costs_what_the_executions_own_log_has_room_for() {
    let body = r#"(func $p i32.const 0 i32.const 3000 call $print)
      (func (export "canister_update once") call $p)
      (func (export "canister_update twice") call $p call $p)"#;
    let mut c = canister(body);
    // Each call of $p: entry 1 + 2 consts + call 5 = 8; the export: entry 1 + call 5 per call.
    // First print into an empty 4 KiB log: 100 + 3000 (printing on) + 2 × 3000 + 50 × 3000.
    let first = 100 + 3000 + 2 * 3000 + 50 * 3000;
    assert_eq!(c.update("once", &[], anon()).instructions, 6 + 8 + first);
    // A second message starts with an empty log again: the same cost, whatever ran before.
    assert_eq!(c.update("once", &[], anon()).instructions, 6 + 8 + first);
    // In one execution the second print finds 4096 - (40 + 3000) = 1056 bytes of room.
    let second = 100 + 3000 + 2 * 3000 + 50 * 1056;
    assert_eq!(c.update("twice", &[], anon()).instructions, (1 + 5 + 5) + 2 * 8 + first + second);
}

/// A canister that calls `echo` on a callee whose id is the argument, and replies with what
/// the callback got: the echoed bytes, or the reject code.
const CALLER: &str = r#"
  (table funcref (elem $on_reply $on_reject))
  (data (i32.const 200) "echo")
  (data (i32.const 300) "ping")
  (func $on_reply (param $env i32) (local $n i32)
    call $arg_size local.set $n
    i32.const 400 i32.const 0 local.get $n call $arg_copy
    i32.const 400 local.get $n call $append call $reply)
  (func $on_reject (param $env i32)
    i32.const 500 call $reject_code i32.store
    i32.const 500 i32.const 4 call $append call $reply)
  (func (export "canister_update echo") (local $n i32)
    call $arg_size local.set $n
    i32.const 0 i32.const 0 local.get $n call $arg_copy
    i32.const 0 local.get $n call $append call $reply)
  (func (export "canister_update ask") (local $n i32)
    call $arg_size local.set $n
    i32.const 100 i32.const 0 local.get $n call $arg_copy
    i32.const 100 local.get $n i32.const 200 i32.const 4 i32.const 0 i32.const 7 i32.const 1 i32.const 8
    call $call_new
    i32.const 300 i32.const 4 call $call_append
    call $call_perform drop)
"#;

#[test]
fn a_call_to_the_canister_itself_runs_and_its_reply_callback_answers_the_caller() {
    let mut c = canister(CALLER);
    let me = stablebench_runner::canister::default_canister_id();
    let alone = c.update("echo", b"ping", anon()).instructions;
    let out = c.update("ask", me.as_slice(), anon());
    assert_eq!(out.result, Ok(b"ping".to_vec()));
    // The outcome counts the method, the callee (same as a direct call) and the callback, with
    // call_new (1,500 + 14 bytes), call_data_append (500 + 50 × 4) and call_perform (5,000).
    assert!(out.instructions > alone + 1_500 + 14 + 500 + 200 + 5_000, "{}", out.instructions);
}

#[test]
fn a_call_to_another_canister_is_rejected_as_destination_invalid() {
    let mut c = canister(CALLER);
    let other = Principal::from_text("ryjl3-tyaaa-aaaaa-aaaba-cai").unwrap();
    let out = c.update("ask", other.as_slice(), anon());
    assert_eq!(out.result, Ok(3i32.to_le_bytes().to_vec()), "reject code 3, DESTINATION_INVALID");
}

#[test]
fn the_global_timer_runs_on_tick_once_due_and_is_cleared() {
    let body = r#"(global $n (mut i32) (i32.const 0))
      (func (export "canister_init") i64.const 1 call $timer_set drop)
      (func (export "canister_global_timer") global.get $n i32.const 1 i32.add global.set $n)
      (func (export "canister_query n") i32.const 0 global.get $n i32.store i32.const 0 i32.const 4 call $append call $reply)"#;
    let mut c = canister(body);
    assert_eq!(c.query("n", &[], anon()).result, Ok(0i32.to_le_bytes().to_vec()));
    let out = c.tick().expect("the timer set in init is due");
    assert_eq!(out.result, Ok(Vec::new()));
    assert_eq!(c.query("n", &[], anon()).result, Ok(1i32.to_le_bytes().to_vec()));
    assert!(c.tick().is_none(), "a timer fires once");
}

#[test]
fn memory_grow_past_the_wasm_memory_limit_traps_in_updates_not_in_queries() {
    let body = r#"(func $grow (param i32)
        i32.const 0 local.get 0 memory.grow i32.store i32.const 0 i32.const 4 call $append call $reply)
      (func (export "canister_update grow4") i32.const 4 call $grow)
      (func (export "canister_query grow4") i32.const 4 call $grow)
      (func (export "canister_update grow_past_4gib") i32.const 70000 call $grow)"#;
    let limited = Options { wasm_memory_limit: 2 * 65_536, ..Options::default() };
    let mut c = canister_with(body, limited);
    assert_eq!(
        c.update("grow4", &[], anon()).result,
        Err(Reject::Trapped(Trap::WasmMemoryLimit { limit: 2 * 65_536, wanted: 5 * 65_536 }))
    );
    assert_eq!(c.heap_bytes(), 65_536, "the trapped update left the heap as it was");
    // Queries are not held to the limit (the interface specification, canister settings).
    assert_eq!(c.query("grow4", &[], anon()).result, Ok(1i32.to_le_bytes().to_vec()));
    // Past 4 GiB a wasm32 memory cannot grow: -1, no trap.
    let mut c = canister_with(body, Options { wasm_memory_limit: 0, ..Options::default() });
    assert_eq!(c.update("grow_past_4gib", &[], anon()).result, Ok((-1i32).to_le_bytes().to_vec()));
}

/// A canister with a `memory_allocation` may not grow its heap and stable memory together past
/// it: a stable grow answers -1, a heap grow traps ("Canister cannot grow its memory usage.");
/// raising the allocation (or removing it) lets them grow again, and an allocation below what
/// the canister uses is refused.
#[test]
fn growing_past_the_memory_allocation_fails_a_stable_grow_and_traps_a_heap_grow() {
    let body = r#"(func $ret (param i64)
        i32.const 0 local.get 0 i64.store i32.const 0 i32.const 8 call $append call $reply)
      (func (export "canister_update sgrow2") i64.const 2 call $sgrow call $ret)
      (func (export "canister_update grow1") i32.const 1 memory.grow i64.extend_i32_s call $ret)"#;
    let page = 65_536u64;
    let answer = |n: i64| Ok(n.to_le_bytes().to_vec());
    let mut c = canister_with(body, Options { memory_allocation: 4 * page, ..Options::default() });
    // Heap 1 page: stable 0 -> 2 fits (3 pages), 2 -> 4 does not (5).
    assert_eq!(c.update("sgrow2", &[], anon()).result, answer(0));
    assert_eq!(c.update("sgrow2", &[], anon()).result, answer(-1));
    assert_eq!(c.stable_memory().len() as u64, 2 * page);
    // Heap 1 -> 2 pages fits (4 pages in all); 2 -> 3 traps and leaves the heap as it was.
    assert_eq!(c.update("grow1", &[], anon()).result, answer(1));
    assert_eq!(c.update("grow1", &[], anon()).result, Err(Reject::Trapped(Trap::OutOfMemory)));
    assert_eq!(c.heap_bytes(), 2 * page);
    assert!(c.set_memory_allocation(3 * page).is_err(), "below the 4 pages in use");
    c.set_memory_allocation(6 * page).unwrap();
    assert_eq!(c.update("sgrow2", &[], anon()).result, answer(2));
    // 2 heap pages and 4 stable: full again, until the allocation is removed (best effort).
    assert_eq!(c.update("grow1", &[], anon()).result, Err(Reject::Trapped(Trap::OutOfMemory)));
    c.set_memory_allocation(0).unwrap();
    assert_eq!(c.update("grow1", &[], anon()).result, answer(2));
    assert_eq!(c.update("sgrow2", &[], anon()).result, answer(4));
}

#[test]
fn canbench_creates_its_canister_with_the_anonymous_principal_as_controller() {
    let body = r#"(func (export "canister_query controller") (local $n i32)
        call $caller_size local.set $n
        i32.const 0 i32.const 0 local.get $n call $caller_copy
        i32.const 100 i32.const 0 local.get $n call $is_controller i32.store
        i32.const 100 i32.const 4 call $append call $reply)"#;
    let yes = 1i32.to_le_bytes().to_vec();
    let mut bench = canister_with(body, bench_options(&BenchSetup::default(), false));
    assert_eq!(bench.query("controller", &[], anon()).result, Ok(yes.clone()));
    let mut plain = canister(body);
    assert_eq!(plain.query("controller", &[], anon()).result, Ok(0i32.to_le_bytes().to_vec()));
}

#[test]
fn canbench_env_vars_files_read_like_canbench() {
    let dir = std::env::temp_dir().join(format!("stablebench-env-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.csv");
    std::fs::write(&good, "A,1\nB , two, three\n").unwrap();
    assert_eq!(
        read_env_vars(&good).unwrap(),
        vec![("A".to_string(), "1".to_string()), ("B".to_string(), "two, three".to_string())]
    );
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, "A=1\n").unwrap();
    assert!(read_env_vars(&bad).unwrap_err().to_string().contains("invalid line"));
}

#[test]
fn the_saved_state_keeps_timer_env_vars_limits_and_float_globals_exactly() {
    let body = r#"(global $f (mut f64) (f64.const 0.1))
      (func (export "canister_init") i64.const 1 call $timer_set drop)
      (func (export "canister_update add") global.get $f f64.const 0.2 f64.add global.set $f call $reply)
      (func (export "canister_query f") i32.const 0 global.get $f f64.store i32.const 0 i32.const 8 call $append call $reply)
      (func (export "canister_global_timer"))"#;
    let opts = Options {
        env_vars: vec![("K".into(), "v".into())],
        wasm_memory_limit: 7 * 65_536,
        limits: Limits::BENCHMARK,
        ..Options::default()
    };
    let mut c = canister_with(body, opts);
    c.update("add", &[], anon());
    let before = c.query("f", &[], anon()).result.unwrap();
    let dir = std::env::temp_dir().join(format!("stablebench-state-{}", std::process::id()));
    c.save(&dir).unwrap();
    let mut d = Canister::load(&dir, false).unwrap();
    assert_eq!(d.query("f", &[], anon()).result.unwrap(), before, "0.1 + 0.2 round-trips bit for bit");
    assert_eq!(d.options().env_vars, vec![("K".to_string(), "v".to_string())]);
    assert_eq!(d.options().wasm_memory_limit, 7 * 65_536);
    assert_eq!(d.options().limits, Limits::BENCHMARK);
    assert_eq!(d.timer(), 1);
    assert!(d.tick().is_some(), "the timer survives the save");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_trap_in_post_upgrade_undoes_what_pre_upgrade_wrote_to_stable_memory() {
    let body = r#"(data (i32.const 0) "\07")
      (func (export "canister_init") i64.const 1 call $sgrow drop)
      (func (export "canister_pre_upgrade") i64.const 0 i64.const 0 i64.const 1 call $swrite)
      (func (export "canister_post_upgrade") unreachable)
      (func (export "canister_query byte")
        i64.const 100 i64.const 0 i64.const 1 call $sread i32.const 100 i32.const 1 call $append call $reply)"#;
    let code = code(body);
    let mut c = Canister::install(code.clone(), &[], Options::default()).unwrap().0;
    assert!(c.upgrade(code, &[]).result.is_err());
    assert_eq!(c.query("byte", &[], anon()).result, Ok(vec![0]), "pre_upgrade's write was undone");
}
