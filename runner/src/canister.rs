//! One canister on wasmtime, with the IC's message semantics (the IC interface specification, "Entry points" and "Canister upgrades"):
//! install runs `start` then `canister_init`; an update that traps leaves no trace (heap, globals
//! and stable memory restored); a query never leaves a trace; an upgrade runs `pre_upgrade`,
//! discards the heap, instantiates the new module and runs `start` and `post_upgrade`, keeping
//! stable memory, and is undone as a whole if any step traps.

use stablebench_grid::ic;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use candid::Principal;
use sha2::{Digest, Sha256};
use wasmtime::{Config, Engine, Instance, Linker, Module, OptLevel, Store, Val};

use crate::host::{self, executed, Call, Host, Kind, Message, PageCounts, Trap};
use crate::instrument::{self, Instrumented, Metering, Tracking, START_EXPORT};
use crate::replica::{self, pocket_ic, reject_code, CostModel};

/// Instruction limits per execution kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// `start` + `canister_init`, or `pre_upgrade` + `start` + `post_upgrade` together.
    pub install: u64,
    /// One update call.
    pub update: u64,
    /// One query call.
    pub query: u64,
}

impl Limits {
    /// An application subnet in production (subnet_config.rs): 300 B install, 40 B update
    /// (MAX_INSTRUCTIONS_PER_MESSAGE), 5 B query (MAX_INSTRUCTIONS_PER_QUERY_MESSAGE).
    pub const PRODUCTION: Limits = Limits {
        install: ic::INSTALL_INSTRUCTION_LIMIT,
        update: ic::UPDATE_INSTRUCTION_LIMIT,
        query: ic::QUERY_INSTRUCTION_LIMIT,
    };

    /// PocketIC's benchmarking subnet, where canbench runs: every message limit raised to
    /// 99,999,999,999,999 except install, which stays at 300 B (pocket_ic.rs
    /// `with_benchmarking_application_subnet`).
    pub const BENCHMARK: Limits = Limits {
        install: ic::INSTALL_INSTRUCTION_LIMIT,
        update: pocket_ic::BENCH_MESSAGE_LIMIT,
        query: pocket_ic::BENCH_MESSAGE_LIMIT,
    };
}

/// The canister id canbench's PocketIC gives the first canister.
pub fn default_canister_id() -> Principal {
    Principal::from_text(pocket_ic::FIRST_CANISTER_ID).expect("valid principal")
}

/// The controller the runner installs canisters with unless told otherwise (a fixed,
/// non-anonymous principal, so that anonymous calls are non-controller calls as on the IC).
pub fn default_controller() -> Principal {
    Principal::from_text("hpikg-6exdt-jn33w-ndty3-fc7jc-tl2lr-buih3-cs3y7-tftkp-sfp62-gqe").expect("valid principal")
}

pub use replica::pocket_ic::START_TIME_NS;

/// How a canister is set up.
#[derive(Clone, Debug)]
pub struct Options {
    /// The canister's id.
    pub canister_id: Principal,
    /// Its controllers.
    pub controllers: Vec<Principal>,
    /// Instruction limits.
    pub limits: Limits,
    /// Print `debug_print` output to stderr as it happens.
    pub print_output: bool,
    /// The canister's `wasm_memory_limit` setting in bytes (default 3 GiB; 0: none).
    pub wasm_memory_limit: u64,
    /// The canister's `memory_allocation` setting in bytes (default 0: best effort): its heap
    /// and stable memory together may not grow past it (a stable grow answers -1, a heap grow
    /// traps).
    pub memory_allocation: u64,
    /// The canister's environment variables (canister settings), any order.
    pub env_vars: Vec<(String, String)>,
    /// Which replica's charges apply (the `ic` model needs code that tracks the pages it
    /// touches: [`Code::new`] does).
    pub cost_model: CostModel,
    /// Where the ic model starts in a benchmark query.
    pub ic_from: host::IcFrom,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            canister_id: default_canister_id(),
            controllers: vec![default_controller()],
            limits: Limits::PRODUCTION,
            print_output: false,
            wasm_memory_limit: replica::DEFAULT_WASM_MEMORY_LIMIT_BYTES,
            memory_allocation: 0,
            env_vars: Vec::new(),
            cost_model: CostModel::Canbench,
            ic_from: host::IcFrom::Start,
        }
    }
}

impl Options {
    /// The host state a canister with these settings starts from.
    fn host(&self) -> Host {
        let mut host = Host::new(self.canister_id, self.controllers.clone());
        host.print_output = self.print_output;
        host.wasm_memory_limit = self.wasm_memory_limit;
        host.memory_allocation = self.memory_allocation;
        host.env_vars = self.env_vars.clone();
        host.env_vars.sort();
        host.model = self.cost_model;
        host.ic_from = self.ic_from;
        host
    }
}

/// Why a call produced no reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reject {
    /// The canister trapped; nothing it did in this message persists.
    Trapped(Trap),
    /// The canister called `msg_reject` with this message (its changes persist).
    Rejected(String),
    /// The method returned without replying (its changes persist).
    DidNotReply,
    /// The canister exports no such method.
    NoSuchMethod(String),
    /// The IC refuses the message before the canister sees it: its argument is over the
    /// ingress limit.
    TooLarge {
        /// Argument size.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
}

/// Largest ingress message argument the IC accepts (MAX_INGRESS_BYTES_PER_MESSAGE, 2 MiB on
/// application subnets).
pub const MAX_INGRESS_BYTES: u64 = 2 << 20;

impl std::fmt::Display for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reject::Trapped(t) => write!(f, "{t}"),
            Reject::Rejected(m) => write!(f, "Canister rejected the message: {m}"),
            Reject::DidNotReply => write!(f, "Canister did not reply to the call"),
            Reject::NoSuchMethod(m) => write!(f, "Canister has no method {m:?}"),
            Reject::TooLarge { bytes, limit } => {
                write!(f, "The message's {bytes} bytes exceed the ingress limit of {limit} bytes")
            }
        }
    }
}

impl std::error::Error for Reject {}

/// What one message did.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The reply bytes, or why there are none.
    pub result: Result<Vec<u8>, Reject>,
    /// Instructions executed (what `performance_counter(0)` would read at the end).
    pub instructions: u64,
    /// Stable-memory pages (4 KiB) the message wrote for the first time.
    pub dirtied_pages: u64,
    /// Heap size after the message, bytes.
    pub heap_bytes: u64,
    /// Stable memory size after the message, bytes.
    pub stable_bytes: u64,
    /// `debug_print` lines.
    pub output: Vec<String>,
    /// Wall-clock time of the execution.
    pub wall: Duration,
    /// The 64 KiB Wasm pages the message's executions touched (each execution counts its own,
    /// as the replica's tracker does; summed over them), if the code tracks them. In a benchmark
    /// query, the pages since its last measured step started (each step starts counting afresh).
    pub pages: PageCounts,
    /// A benchmark's measured steps ([`host::Measure::steps`]).
    pub steps: Vec<host::Step>,
    /// The pages [`Outcome::pages`] counts, page by page, one set per execution of the message
    /// (empty if the code does not track pages).
    pub page_sets: Vec<host::PageSet>,
}

impl Outcome {
    /// The pages of a benchmark's measured steps, summed; `None` if it marked none.
    pub fn step_pages(&self) -> Option<PageCounts> {
        host::steps_pages(&self.steps)
    }
}

/// The wasmtime engine, configured as the replica configures its own where it matters
/// (ic:rs/embedders/src/wasmtime_embedder.rs): NaN canonicalisation on, memory64 allowed,
/// a 5 MiB wasm stack.
pub fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut c = Config::new();
        c.cranelift_opt_level(OptLevel::Speed);
        c.cranelift_nan_canonicalization(true);
        c.wasm_memory64(true);
        c.max_wasm_stack(WASM_STACK);
        c.async_stack_size(WASM_STACK + (1 << 20));
        // Memories of the runner's own, so that a tracked heap grows protected (crate::faults).
        #[cfg(unix)]
        if crate::faults::counting() {
            c.with_host_memory(Arc::new(crate::faults::Creator));
            // (wasmtime's copy-on-write images need its own memories.)
            c.memory_init_cow(false);
        }
        Engine::new(&c).expect("wasmtime engine")
    })
}

const WASM_STACK: usize = 5 << 20;
/// Native stack of the thread that runs wasm: the wasm stack plus room for host functions.
const THREAD_STACK: usize = 64 << 20;

/// A compiled, instrumented canister module; cheap to share between canisters.
pub struct Code {
    /// The original wasm bytes.
    pub wasm: Vec<u8>,
    /// What instrumentation found.
    pub info: Instrumented,
    /// Function exports of the original module.
    pub exports: Vec<String>,
    /// Whether metering was injected.
    pub metering: Metering,
    module: Module,
    linker: Linker<Host>,
}

impl Code {
    /// Instruments and compiles `wasm` (gzip accepted). Compiled modules are cached on disk
    /// (`$STABLEBENCH_CACHE_DIR`, default `~/.cache/stablebench/modules`) by content hash.
    pub fn new(wasm: &[u8], metering: Metering) -> Result<Arc<Code>> {
        Code::with_heap_tracking(wasm, metering, true)
    }

    /// [`Code::new`] with the tracking asked for (see [`instrument::Tracking`]).
    pub fn with_tracking(wasm: &[u8], metering: Metering, tracking: Tracking) -> Result<Arc<Code>> {
        let wasm = maybe_gunzip(wasm)?;
        let info = instrument::instrument_tracked(&wasm, metering, tracking).context("instrumenting the wasm")?;
        Code::compile(wasm, info, metering)
    }

    /// [`Code::new`], without heap tracking unless `track_heap`: for canisters whose executions
    /// are never undone (each runs in a process that ends with it), where tracking is only cost.
    /// Undoing an execution then copies the whole heap.
    ///
    /// The pages a message touches are counted by the module's marks in a canister that keeps
    /// its executions (`track_heap`: many short messages, each of which would protect and open
    /// the whole heap to count by faults; `runner/tests/chia_pages.rs`'s replay took 37.6 and
    /// 39.3 s by faults against 19.3 and 20.5 s by marks), by faults where the platform allows
    /// otherwise ([`instrument::PageCounting::on`]): `bench`'s long queries. Both count the same
    /// pages.
    pub fn with_heap_tracking(wasm: &[u8], metering: Metering, track_heap: bool) -> Result<Arc<Code>> {
        let pages = if track_heap { instrument::PageCounting::Marks } else { instrument::PageCounting::on() };
        Code::with_tracking(wasm, metering, Tracking { heap: track_heap, pages })
    }

    fn compile(wasm: Vec<u8>, info: Instrumented, metering: Metering) -> Result<Arc<Code>> {
        if info.mem_type == instrument::MemType::Wasm64 {
            bail!("wasm64 canisters are not supported by the offline runner yet");
        }
        let exports = instrument::exported_functions(&wasm)?;
        let module = compile_cached(&info.wasm)?;
        let mut linker = Linker::new(engine());
        host::add_to_linker(&mut linker).map_err(wt)?;
        if metering == Metering::Profiled {
            crate::profile::add_to_linker(&mut linker).map_err(wt)?;
        }
        // Fail now, naming every import the runner does not provide.
        let mut probe = Store::new(engine(), Host::new(Principal::anonymous(), vec![]));
        let missing: Vec<String> = module
            .imports()
            .filter(|i| linker.get_by_import(&mut probe, i).is_none())
            .map(|i| format!("{}.{}", i.module(), i.name()))
            .collect();
        if !missing.is_empty() {
            bail!("the canister imports functions the offline runner does not implement: {}", missing.join(", "));
        }
        Ok(Arc::new(Code { wasm, info, exports, metering, module, linker }))
    }

    /// Reads and compiles a wasm file.
    pub fn from_file(path: &Path, metering: Metering) -> Result<Arc<Code>> {
        Code::from_file_with_heap_tracking(path, metering, true)
    }

    /// [`Code::from_file`] with heap tracking only if `track_heap` (see [`Code::with_heap_tracking`]).
    pub fn from_file_with_heap_tracking(path: &Path, metering: Metering, track_heap: bool) -> Result<Arc<Code>> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Code::with_heap_tracking(&bytes, metering, track_heap).with_context(|| format!("loading {}", path.display()))
    }

    /// [`Code::from_file`] with the tracking asked for (see [`instrument::Tracking`]).
    pub fn from_file_tracked(path: &Path, metering: Metering, tracking: Tracking) -> Result<Arc<Code>> {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Code::with_tracking(&bytes, metering, tracking).with_context(|| format!("loading {}", path.display()))
    }

    /// Whether this code can run under `model`: the `ic` model charges the pages a message
    /// touches, so the code must track them.
    fn supports(&self, model: CostModel) -> Result<()> {
        if model == CostModel::Ic && !self.info.tracks_pages {
            bail!("the ic cost model charges the pages a message touches: the code must track them");
        }
        Ok(())
    }

    /// True if the module exports `name`.
    pub fn exports(&self, name: &str) -> bool {
        self.exports.iter().any(|e| e == name)
    }

    /// How another canister's call, or an ingress update call, runs `method`: its update, or else
    /// its query (run replicated, its changes discarded); `None` if it exports neither.
    pub fn method_export(&self, method: &str) -> Option<(Kind, String)> {
        [(Kind::Update, format!("canister_update {method}")), (Kind::Query, format!("canister_query {method}"))]
            .into_iter()
            .find(|(_, export)| self.exports(export))
    }

    /// The Candid interface the canister's own code generates, if it exports one: the string
    /// that `ic_cdk::export_candid!`'s `get_candid_pointer` returns (what dfx's candid-extractor
    /// reads), run on a fresh instance. Unlike the `candid:service` metadata, which the build
    /// copies from a `.did` file, this comes from the code's types, so comparing the two checks
    /// the file without a native build of the canister.
    pub fn generated_candid(&self) -> Result<Option<String>> {
        const EXPORT: &str = "get_candid_pointer";
        if !self.exports(EXPORT) {
            return Ok(None);
        }
        let (mut store, instance) = instantiate(self, Host::new(Principal::anonymous(), Vec::new()))?;
        let counter = instance.get_global(&mut store, instrument::COUNTER_EXPORT).context("the counter global")?;
        counter.set(&mut store, Val::I64(i64::MAX)).map_err(wt)?;
        let f = instance.get_typed_func::<(), i32>(&mut store, EXPORT).map_err(wt)?;
        let ptr = std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(THREAD_STACK)
                .spawn_scoped(s, || f.call(&mut store, ()))
                .expect("spawn the execution thread")
                .join()
                .expect("the execution thread panicked")
        })
        .map_err(wt)
        .with_context(|| format!("calling {EXPORT}"))?;
        let memory = instance.get_memory(&mut store, instrument::MEMORY_EXPORT).context("no heap")?;
        let heap = memory.data(&store);
        let text = heap.get(ptr as u32 as usize..).context("the pointer is outside the heap")?;
        let end = text.iter().position(|b| *b == 0).context("the string does not end")?;
        Ok(Some(String::from_utf8(text[..end].to_vec()).context("the interface is not UTF-8")?))
    }

    /// The public or private `candid:service` metadata, if embedded.
    pub fn candid_service(&self) -> Option<String> {
        ["icp:public candid:service", "icp:private candid:service"]
            .iter()
            .find_map(|n| instrument::custom_section(&self.info.custom_sections, n))
            .map(|d| String::from_utf8_lossy(d).into_owned())
    }
}

fn maybe_gunzip(bytes: &[u8]) -> Result<Vec<u8>> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).context("gunzip")?;
        Ok(out)
    } else {
        Ok(bytes.to_vec())
    }
}

fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("STABLEBENCH_CACHE_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/stablebench/modules"))
}

fn compile_cached(wasm: &[u8]) -> Result<Module> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine().precompile_compatibility_hash().hash(&mut h);
    let key = format!("{:x}-{:016x}", Sha256::digest(wasm), h.finish());
    let path = cache_dir().map(|d| d.join(format!("{key}.cwasm")));
    if let Some(p) = &path {
        if p.exists() {
            // SAFETY: the file was written by `Module::serialize` below, for this engine
            // configuration (the key includes the engine's compatibility hash).
            if let Ok(m) = unsafe { Module::deserialize_file(engine(), p) } {
                return Ok(m);
            }
        }
    }
    let module = Module::new(engine(), wasm).map_err(wt).context("compiling the instrumented wasm")?;
    if let Some(p) = path {
        if let (Some(dir), Ok(bytes)) = (p.parent(), module.serialize()) {
            let tmp = p.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::create_dir_all(dir).is_ok() && std::fs::write(&tmp, bytes).is_ok() {
                let _ = std::fs::rename(&tmp, &p);
            }
        }
    }
    Ok(module)
}

/// Saved heap and globals, to go back to the state before an execution.
struct Snapshot {
    heap: Vec<u8>,
    globals: Vec<(u32, Val)>,
}

/// What the wasm runs: an export, or a callback by table index with its environment.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entry<'a> {
    Export(&'a str),
    Callback(u32, u32),
}

/// One execution of a message between canisters ([`crate::network`]): what
/// [`Canister::execute_message`] ran.
pub(crate) struct Executed {
    /// Why it trapped (then everything it did is undone, its cycles included).
    pub trap: Option<Trap>,
    /// Instructions, the ic model's page fees included.
    pub used: u64,
    /// Its context after it ran (reply state, cycles left unaccepted).
    pub msg: Message,
    /// The calls it performed (none if it trapped or was a query).
    pub calls: Vec<Call>,
    /// The 64 KiB Wasm pages it touched.
    pub pages: PageCounts,
    /// Its `debug_print` lines.
    pub output: Vec<String>,
}

/// One execution's result.
struct Execution {
    trap: Option<Trap>,
    used: u64,
    /// The execution's context after it ran (reply state), if it did not trap.
    msg: Message,
    /// Calls it performed (none if it trapped or was a query).
    calls: Vec<Call>,
    dirtied: u64,
    output: Vec<String>,
}

/// Upper bound on the executions one message may trigger (callbacks, self-calls), against a
/// canister that calls itself forever.
const MAX_EXECUTIONS_PER_MESSAGE: u64 = 100_000;

/// A canister: its code, its live wasmtime instance and its stable memory.
pub struct Canister {
    code: Arc<Code>,
    store: Store<Host>,
    instance: Instance,
    opts: Options,
    /// Replicated executions so far (the clock moves 1 ms with each).
    messages: u64,
    /// Time added by [`Canister::advance_time`], ns.
    time_offset: u64,
    /// Executions of the current message (calls and callbacks included).
    executions: u64,
    /// Calls to the management canister's `raw_rand` so far (seeds its deterministic bytes).
    raw_rand_calls: u64,
    /// The heap as the last kept execution left it, if the module tracks the pages it writes
    /// (`Instrumented::tracks_heap`): an execution is undone, and kept, by copying only those
    /// pages, instead of saving the whole heap before every execution.
    committed: Option<Vec<u8>>,
    /// Set by [`Canister::last_query`]: nothing will run on this canister afterwards, so its
    /// last execution is not undone.
    last: bool,
    /// The pages the current message's executions touched, and those of its measured steps
    /// (for its [`Outcome`]).
    touched: (PageCounts, Vec<host::Step>),
    /// The current message's executions' pages, page by page (for its [`Outcome`]).
    page_sets: Vec<host::PageSet>,
}

/// Whether every execution of a heap-tracking canister is followed by a full comparison of the
/// heap with its committed image (a test of the tracking; slow). Set by
/// `STABLEBENCH_RUNNER_CHECK_HEAP` or [`check_heap_tracking`].
static CHECK_HEAP: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Turns the comparison of [`CHECK_HEAP`] on or off for every canister of this process.
pub fn check_heap_tracking(on: bool) {
    CHECK_HEAP.store(if on { 2 } else { 1 }, std::sync::atomic::Ordering::Relaxed);
}

fn checking_heap() -> bool {
    match CHECK_HEAP.load(std::sync::atomic::Ordering::Relaxed) {
        0 => {
            let on = std::env::var_os("STABLEBENCH_RUNNER_CHECK_HEAP").is_some_and(|v| v != "0");
            check_heap_tracking(on);
            on
        }
        v => v == 2,
    }
}

/// Heap bytes per page of the written-pages map.
const TRACKED_PAGE: usize = 1 << instrument::DIRTY_PAGE_SHIFT;

impl Canister {
    /// Creates and installs a canister: `start`, then `canister_init(arg)`, within the install
    /// limit. A trap leaves nothing: the error says why.
    pub fn install(code: Arc<Code>, arg: &[u8], opts: Options) -> Result<(Canister, Outcome)> {
        code.supports(opts.cost_model)?;
        let (store, instance) = instantiate(&code, opts.host())?;
        let mut c = Canister {
            code,
            store,
            instance,
            opts,
            messages: 0,
            time_offset: 0,
            executions: 0,
            raw_rand_calls: 0,
            committed: None,
            last: false,
            touched: Default::default(),
            page_sets: Vec::new(),
        };
        let limit = c.opts.limits.install;
        c.begin(Kind::Init, arg.to_vec(), Principal::anonymous());
        let started = Instant::now();
        let (r, used) = c.run_install_steps(&[START_EXPORT, "canister_init"], Kind::Init, limit);
        let out = c.finish(r.map(|_| Vec::new()).map_err(Reject::Trapped), used, started);
        if let Err(e) = &out.result {
            bail!("install failed: {e}");
        }
        c.store.data_mut().version = 1;
        c.recommit();
        Ok((c, out))
    }

    /// Runs update `method` with Candid-encoded `arg` from `caller`. If the canister traps,
    /// every change of the execution is undone. Calls the method makes are delivered and their
    /// callbacks run before this returns (see the module docs of `host`); the outcome counts the
    /// instructions of all of them.
    pub fn update(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.message(Kind::Update, &format!("canister_update {method}"), method, arg, caller)
    }

    /// Runs query `method`; its changes are always undone.
    pub fn query(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.message(Kind::Query, &format!("canister_query {method}"), method, arg, caller)
    }

    /// Runs query `method` priced as the same reads inside an update: the execution of
    /// [`Canister::query`] (its changes undone, the query's limits), with the ic model's write fee
    /// charged for every Wasm page it writes, as in an update (a plain query pays the access fee
    /// only). What n reads cost in an update message that does nothing else; the canbench model
    /// charges no page fees either way.
    pub fn query_priced_as_update(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.store.data_mut().queries_as_updates = true;
        let out = self.query(method, arg, caller);
        self.store.data_mut().queries_as_updates = false;
        out
    }

    /// Runs query `method` as the last thing this canister does: the same execution and outcome
    /// as [`Canister::query`], without saving or undoing anything (the canister is dropped, or
    /// its process ends, afterwards).
    pub fn last_query(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.last = true;
        self.query(method, arg, caller)
    }

    /// Hands the canister's setup-stage reports to `hook` (see [`host::StageHook`]), or stops.
    pub fn set_stage_hook(&mut self, hook: Option<Box<dyn host::StageHook>>) {
        self.store.data_mut().stage_hook = hook;
    }

    /// Runs `canister_global_timer` if the global timer is set and due (the timer is cleared
    /// first, as on the IC), with the calls it makes (ic-cdk's timers call the canister itself).
    /// `None` if no timer is due.
    pub fn tick(&mut self) -> Option<Outcome> {
        let due = self.store.data().timer;
        if due == 0 || due > self.time() || !self.code.exports("canister_global_timer") {
            return None;
        }
        self.store.data_mut().timer = 0;
        let id = self.store.data().canister_id;
        let mut out = self.message(Kind::GlobalTimer, "canister_global_timer", "canister_global_timer", &[], id);
        // A timer answers nobody.
        if matches!(out.result, Err(Reject::DidNotReply)) {
            out.result = Ok(Vec::new());
        }
        Some(out)
    }

    /// Moves the canister's clock forward by `ns` nanoseconds.
    pub fn advance_time(&mut self, ns: u64) {
        self.time_offset += ns;
    }

    /// The canister's current time (`ic0.time` of its next execution), ns since 1970.
    pub fn now(&self) -> u64 {
        self.time()
    }

    /// The global timer (ns since 1970; 0 if unset).
    pub fn timer(&self) -> u64 {
        self.store.data().timer
    }

    /// Upgrades to `code`: `pre_upgrade` on the old instance, a fresh instance of the new module
    /// (heap discarded, stable memory kept), `start`, `post_upgrade(arg)`, all within one install
    /// limit. On a trap the canister is left exactly as before.
    pub fn upgrade(&mut self, code: Arc<Code>, arg: &[u8]) -> Outcome {
        let limit = self.opts.limits.install;
        // Between messages the committed image is the heap: no copy needed to go back.
        let snap = match self.committed.take() {
            Some(heap) => Snapshot { heap, globals: self.globals() },
            None => self.snapshot(),
        };
        let old_code = self.code.clone();
        self.begin(Kind::PreUpgrade, Vec::new(), Principal::anonymous());
        let started = Instant::now();
        let (mut r, mut used) = self.call_if_exported("canister_pre_upgrade", limit);
        if r.is_ok() {
            let host = self.take_host();
            match try_instantiate(&code, host) {
                Ok((store, instance)) => {
                    self.store = store;
                    self.instance = instance;
                    self.code = code;
                    self.store.data_mut().msg =
                        Message::new(Kind::PostUpgrade, arg.to_vec(), Principal::anonymous(), self.time());
                    let (r2, used2) = self.run_install_steps(
                        &[START_EXPORT, "canister_post_upgrade"],
                        Kind::PostUpgrade,
                        limit - used.min(limit),
                    );
                    r = r2;
                    used += used2;
                }
                Err(failed) => {
                    let (e, host) = *failed;
                    // The new module does not even instantiate: back to the old one, with the host
                    // (and its stable memory) handed back untouched.
                    let (store, instance) = instantiate(&old_code, host).expect("old code instantiates");
                    self.store = store;
                    self.instance = instance;
                    r = Err(Trap::Canister(format!("instantiating the new module: {e:#}")));
                }
            }
        }
        if r.is_err() {
            self.store.data_mut().stable.rollback();
            self.code = old_code;
            self.restore(snap);
        } else {
            self.store.data_mut().version += 1;
            self.recommit();
        }
        self.finish(r.map(|_| Vec::new()).map_err(Reject::Trapped), used, started)
    }

    /// Charges what `model` charges from the next message on (the `ic` model needs code that
    /// tracks the pages it touches, as [`Code::new`]'s does).
    pub fn set_cost_model(&mut self, model: CostModel) -> Result<()> {
        self.code.supports(model)?;
        self.opts.cost_model = model;
        self.store.data_mut().model = model;
        Ok(())
    }

    /// An independent copy of this canister in its current state (heap, globals, stable memory,
    /// settings), with its own wasmtime instance, so that it can run on another thread.
    pub fn fork(&mut self) -> Result<Canister> {
        let snap = self.snapshot();
        let host = self.store.data().clone_state();
        let (store, instance) = instantiate(&self.code, host)?;
        let mut c = Canister {
            code: self.code.clone(),
            store,
            instance,
            opts: self.opts.clone(),
            messages: self.messages,
            time_offset: self.time_offset,
            executions: 0,
            raw_rand_calls: self.raw_rand_calls,
            committed: None,
            last: false,
            touched: Default::default(),
            page_sets: Vec::new(),
        };
        c.fill(snap);
        Ok(c)
    }

    /// With profiled code (`Metering::Profiled`) that tracks pages: attributes each Wasm page a
    /// message touches to the function that touched it first (slower: the page marks are
    /// collected at every function entry and exit). See [`crate::profile`], "Pages".
    pub fn set_profile_pages(&mut self, on: bool) {
        self.store.data_mut().profile_pages = on && self.code.info.tracks_pages;
    }

    /// The profile of the last message, if the code is profiled (`Metering::Profiled`).
    pub fn take_profile(&mut self) -> Option<crate::profile::Profile> {
        self.store.data_mut().profile.take().map(|p| p.finish())
    }

    /// The canister's current stable memory.
    pub fn stable_memory(&self) -> &[u8] {
        &self.store.data().stable.bytes
    }

    /// Replaces stable memory with `bytes`, rounded up to whole 64 KiB pages (canbench's
    /// `stable_memory.file`, loaded after install).
    pub fn set_stable_memory(&mut self, bytes: &[u8]) {
        self.store.data_mut().stable = host::StableMemory::from_bytes(bytes.to_vec());
    }

    /// Heap size in bytes.
    pub fn heap_bytes(&mut self) -> u64 {
        self.memory().map_or(0, |m| m.data_size(&self.store) as u64)
    }

    /// Sets the canister's `memory_allocation` in bytes (0: best effort), as a controller's
    /// `update_settings` does between two messages. Refused below what the heap and stable
    /// memory use now, as the replica refuses it.
    pub fn set_memory_allocation(&mut self, bytes: u64) -> Result<()> {
        let used = self.heap_bytes() + self.stable_memory().len() as u64;
        if bytes != 0 && bytes < used {
            bail!("a memory allocation of {bytes} bytes is below the {used} bytes the canister uses");
        }
        self.opts.memory_allocation = bytes;
        self.store.data_mut().memory_allocation = bytes;
        Ok(())
    }

    /// The code the canister runs.
    pub fn code(&self) -> &Arc<Code> {
        &self.code
    }

    /// The options the canister was set up with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    fn time(&self) -> u64 {
        // Constant within an execution, one millisecond later for each replicated execution.
        START_TIME_NS + self.messages * 1_000_000 + self.time_offset
    }

    fn memory(&mut self) -> Option<wasmtime::Memory> {
        self.instance.get_memory(&mut self.store, instrument::MEMORY_EXPORT)
    }

    fn begin(&mut self, kind: Kind, arg: Vec<u8>, caller: Principal) {
        let msg = Message::new(kind, arg, caller, self.time());
        self.store.data_mut().begin(msg);
        self.store.data_mut().profile = None;
    }

    fn refused(&mut self, reject: Reject) -> Outcome {
        Outcome {
            result: Err(reject),
            instructions: 0,
            dirtied_pages: 0,
            heap_bytes: self.heap_bytes(),
            stable_bytes: self.stable_memory().len() as u64,
            output: Vec::new(),
            wall: Duration::ZERO,
            pages: PageCounts::default(),
            steps: Vec::new(),
            page_sets: Vec::new(),
        }
    }

    fn message(&mut self, kind: Kind, export: &str, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        if arg.len() as u64 > MAX_INGRESS_BYTES {
            return self.refused(Reject::TooLarge { bytes: arg.len() as u64, limit: MAX_INGRESS_BYTES });
        }
        if !self.code.exports(export) {
            return self.refused(Reject::NoSuchMethod(method.to_string()));
        }
        let started = Instant::now();
        self.executions = 0;
        self.store.data_mut().profile = None;
        self.touched = Default::default();
        self.page_sets.clear();
        let (result, used, dirtied, output) = self.call_context(kind, export, arg.to_vec(), caller);
        let (pages, steps) = std::mem::take(&mut self.touched);
        Outcome {
            result,
            instructions: used,
            dirtied_pages: dirtied,
            heap_bytes: self.heap_bytes(),
            stable_bytes: self.stable_memory().len() as u64,
            output,
            wall: started.elapsed(),
            pages,
            steps,
            page_sets: std::mem::take(&mut self.page_sets),
        }
    }

    /// Runs one call context: the method's execution, then the calls it performed, each
    /// answered and followed by its callback (which may reply to this context's caller and make
    /// further calls). Returns the reply, the instructions of every execution, the stable pages
    /// they dirtied and their output.
    fn call_context(
        &mut self,
        kind: Kind,
        export: &str,
        arg: Vec<u8>,
        caller: Principal,
    ) -> (Result<Vec<u8>, Reject>, u64, u64, Vec<String>) {
        let limit = if kind == Kind::Query { self.opts.limits.query } else { self.opts.limits.update };
        let first = self.execute(Message::new(kind, arg, caller, self.time()), Entry::Export(export), limit);
        let (mut used, mut dirtied, mut output) = (first.used, first.dirtied, first.output);
        if let Some(t) = first.trap {
            return (Err(Reject::Trapped(t)), used, dirtied, output);
        }
        let mut ctx = first.msg;
        let mut queue: std::collections::VecDeque<Call> = first.calls.into();
        while let Some(call) = queue.pop_front() {
            let response = self.deliver(&call, &mut used, &mut dirtied, &mut output);
            // Nobody offline accepts cycles: whatever the call carried comes back.
            self.store.data_mut().cycles += call.cycles;
            let (kind, (fun, env), arg, code, text) = match response {
                Ok(reply) => (Kind::ReplyCallback, call.reply, reply, 0, String::new()),
                Err((code, text)) => (Kind::RejectCallback, call.reject, Vec::new(), code, text),
            };
            let mut m = Message::new(kind, arg, ctx.caller, self.time());
            (m.reply, m.replied, m.rejected, m.max_reply) =
                (ctx.reply.clone(), ctx.replied, ctx.rejected.clone(), ctx.max_reply);
            (m.reject_code, m.reject_message, m.cycles_refunded) = (code, text, call.cycles);
            let e = self.execute(m, Entry::Callback(fun, env), self.opts.limits.update);
            used += e.used;
            dirtied += e.dirtied;
            output.extend(e.output);
            match e.trap {
                None => {
                    (ctx.reply, ctx.replied, ctx.rejected) = (e.msg.reply, e.msg.replied, e.msg.rejected);
                    queue.extend(e.calls);
                }
                Some(_) => {
                    if let Some((fun, env)) = call.cleanup {
                        let m = Message::new(Kind::Cleanup, Vec::new(), ctx.caller, self.time());
                        let e = self.execute(m, Entry::Callback(fun, env), self.opts.limits.update);
                        used += e.used;
                        dirtied += e.dirtied;
                        output.extend(e.output);
                    }
                }
            }
        }
        let result = match (ctx.rejected, ctx.replied) {
            (Some(msg), _) => Err(Reject::Rejected(msg)),
            (None, true) => Ok(ctx.reply),
            (None, false) => Err(Reject::DidNotReply),
        };
        (result, used, dirtied, output)
    }

    /// Answers a call: a call to this canister runs here (its own call context), `raw_rand` of
    /// the management canister returns 32 deterministic bytes, anything else is rejected as the
    /// replica rejects a call to a canister that does not exist. Err: (reject code, message).
    fn deliver(
        &mut self,
        call: &Call,
        used: &mut u64,
        dirtied: &mut u64,
        output: &mut Vec<String>,
    ) -> Result<Vec<u8>, (i32, String)> {
        let me = self.store.data().canister_id;
        if call.callee == me {
            let Some((kind, export)) = self.code.method_export(&call.method) else {
                return Err((
                    reject_code::CANISTER_ERROR,
                    format!("Canister {me} has no update method '{}'", call.method),
                ));
            };
            if self.executions >= MAX_EXECUTIONS_PER_MESSAGE {
                return Err((reject_code::SYS_TRANSIENT, "too many nested calls in one message offline".into()));
            }
            let (r, u, d, o) = self.call_context(kind, &export, call.arg.clone(), me);
            *used += u;
            *dirtied += d;
            output.extend(o);
            return match r {
                Ok(reply) => Ok(reply),
                Err(Reject::Rejected(m)) => Err((reject_code::CANISTER_REJECT, m)),
                Err(e) => Err((reject_code::CANISTER_ERROR, e.to_string())),
            };
        }
        if call.callee == Principal::management_canister() && call.method == "raw_rand" {
            return Ok(self.raw_rand());
        }
        Err((
            reject_code::DESTINATION_INVALID,
            format!(
                "Canister {} not found (a lone canister: stablebench_runner::network runs several together)",
                call.callee
            ),
        ))
    }

    /// Runs one execution from a snapshot: on a trap (or always, for a query) everything it did
    /// is undone.
    fn execute(&mut self, msg: Message, entry: Entry<'_>, limit: u64) -> Execution {
        self.executions += 1;
        let kind = msg.kind;
        // A tracked heap is undone from its committed image; otherwise save the whole heap
        // (unless this is the canister's last execution, which nothing needs undone).
        let (snap, globals) = match self.committed {
            _ if self.last => (None, Vec::new()),
            Some(_) => (None, self.globals()),
            None => (Some(self.snapshot()), Vec::new()),
        };
        self.store.data_mut().begin(msg);
        let (r, used) = self.call(entry, limit);
        let h = self.store.data_mut();
        let calls = std::mem::take(&mut h.performed);
        let msg = h.msg.clone();
        let output = std::mem::take(&mut h.output);
        let dirtied = h.stable.dirtied;
        let keep = r.is_ok() && kind != Kind::Query;
        if self.last {
            // Nothing runs after this execution: neither undone nor kept.
        } else if !keep {
            self.store.data_mut().stable.rollback();
            match snap {
                Some(snap) => self.restore(snap),
                None => self.undo_tracked(globals),
            }
        } else if snap.is_none() {
            self.commit_tracked();
        }
        if kind != Kind::Query {
            self.messages += 1;
        }
        Execution { trap: r.err(), used, msg, calls: if keep { calls } else { Vec::new() }, dirtied, output }
    }

    /// Runs one execution of `msg` as a message of its own, for [`crate::network`]: its own
    /// instruction limit and page counts; a trap undoes it, the cycles it attached or accepted
    /// included, and performs none of its calls.
    pub(crate) fn execute_message(&mut self, msg: Message, entry: Entry<'_>) -> Executed {
        let limit = if msg.kind == Kind::Query { self.opts.limits.query } else { self.opts.limits.update };
        self.executions = 0;
        self.store.data_mut().profile = None;
        self.touched = Default::default();
        let balance = self.store.data().cycles;
        let e = self.execute(msg, entry, limit);
        if e.trap.is_some() {
            self.store.data_mut().cycles = balance;
        }
        let (pages, _) = std::mem::take(&mut self.touched);
        self.page_sets.clear();
        Executed { trap: e.trap, used: e.used, msg: e.msg, calls: e.calls, pages, output: e.output }
    }

    /// The canister's id.
    pub fn id(&self) -> Principal {
        self.store.data().canister_id
    }

    /// The canister's cycle balance.
    pub fn cycles(&self) -> u128 {
        self.store.data().cycles
    }

    /// Sets the canister's cycle balance (what the network charges and refunds).
    pub(crate) fn set_cycles(&mut self, cycles: u128) {
        self.store.data_mut().cycles = cycles;
    }

    /// The management canister's `raw_rand` for this canister: 32 deterministic bytes, Candid
    /// encoded, a new value each call.
    pub(crate) fn raw_rand(&mut self) -> Vec<u8> {
        self.raw_rand_calls += 1;
        let bytes = Sha256::digest(format!("stablebench raw_rand {}", self.raw_rand_calls)).to_vec();
        candid::encode_one(bytes).expect("encode a blob")
    }

    /// The time of the canister's next execution.
    pub(crate) fn clock(&self) -> u64 {
        self.time()
    }

    fn finish(&mut self, result: Result<Vec<u8>, Reject>, instructions: u64, started: Instant) -> Outcome {
        // The clock moves with replicated executions.
        if self.store.data().msg.kind != Kind::Query {
            self.messages += 1;
        }
        let heap_bytes = self.heap_bytes();
        let h = self.store.data_mut();
        Outcome {
            result,
            instructions,
            dirtied_pages: h.stable.dirtied,
            heap_bytes,
            stable_bytes: h.stable.bytes.len() as u64,
            output: std::mem::take(&mut h.output),
            wall: started.elapsed(),
            pages: std::mem::take(&mut self.touched.0),
            steps: Vec::new(),
            page_sets: std::mem::take(&mut self.page_sets),
        }
    }

    /// Runs the exported steps that exist, one after the other, sharing `limit`.
    fn run_install_steps(&mut self, steps: &[&str], kind: Kind, limit: u64) -> (Result<(), Trap>, u64) {
        let mut used = 0;
        for step in steps {
            let k = if *step == START_EXPORT { Kind::Start } else { kind };
            self.store.data_mut().next_step(k);
            let (r, u) = self.call_if_exported(step, limit - used.min(limit));
            used += u;
            if let Err(e) = r {
                return (Err(e), used);
            }
        }
        (Ok(()), used)
    }

    fn call_if_exported(&mut self, export: &str, limit: u64) -> (Result<(), Trap>, u64) {
        if self.code.exports(export) || (export == START_EXPORT && self.code.info.has_start) {
            self.call(Entry::Export(export), limit)
        } else {
            (Ok(()), 0)
        }
    }

    /// Calls `entry` with the counter set to `limit`; returns how it ended and the
    /// instructions it executed.
    fn call(&mut self, entry: Entry<'_>, limit: u64) -> (Result<(), Trap>, u64) {
        enum Callable {
            Export(wasmtime::TypedFunc<(), ()>),
            Callback(wasmtime::TypedFunc<i32, ()>, i32),
        }
        let counter = self.instance.get_global(&mut self.store, instrument::COUNTER_EXPORT).expect("counter export");
        let flag = self
            .instance
            .get_global(&mut self.store, instrument::OUT_OF_INSTRUCTIONS_FLAG_EXPORT)
            .expect("flag export");
        counter.set(&mut self.store, Val::I64(limit.min(i64::MAX as u64) as i64)).expect("set counter");
        flag.set(&mut self.store, Val::I32(0)).expect("set flag");
        self.store.data_mut().limit = limit;
        host::restart_pages(&mut self.store);
        let callable = match entry {
            Entry::Export(export) => match self.instance.get_typed_func::<(), ()>(&mut self.store, export) {
                Ok(f) => Callable::Export(f),
                Err(e) => return (Err(Trap::ContractViolation(format!("{export}: {e}"))), 0),
            },
            Entry::Callback(fun, env) => match self.callback(fun) {
                Ok(f) => Callable::Callback(f, env as i32),
                Err(t) => return (Err(t), 0),
            },
        };
        self.store.data_mut().executing = true;
        let store = &mut self.store;
        let r = std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(THREAD_STACK)
                .spawn_scoped(s, move || {
                    let r = match callable {
                        Callable::Export(f) => f.call(&mut *store, ()),
                        Callable::Callback(f, env) => f.call(&mut *store, env),
                    };
                    // A fork that measures another cell from a shared setup (`crate::shared`) ends
                    // here: its process has only this thread, and nothing to go back to.
                    if let Some(hook) = store.data_mut().forked.take() {
                        let out_of_instructions = flag.get(&mut *store).unwrap_i32() == 1;
                        let r = Self::end_execution(&mut *store, r);
                        let trap = r.as_ref().err().map(|e| to_trap(e, out_of_instructions).to_string());
                        let h = store.data_mut();
                        hook.finish(host::ExecutionEnd {
                            trap,
                            replied: h.msg.replied,
                            reply: std::mem::take(&mut h.msg.reply),
                            rejected: h.msg.rejected.take(),
                            output: std::mem::take(&mut h.output),
                            steps: h.measure.steps().to_vec(),
                        });
                    }
                    r
                })
                .expect("spawn the execution thread")
                .join()
                .expect("the execution thread panicked")
        });
        self.store.data_mut().executing = false;
        let r = Self::end_execution(&mut self.store, r);
        let pages = host::page_counts(&mut self.store);
        self.touched.0 = self.touched.0.plus(&pages);
        if self.store.data().has_page_source() {
            let set = host::page_set(self.store.data());
            self.page_sets.push(set);
        }
        let m = &self.store.data().measure;
        if !m.steps().is_empty() {
            self.touched.1 = m.steps().to_vec();
        }
        let used = executed(limit, counter.get(&mut self.store).unwrap_i64());
        crate::profile::end_call(self.store.data_mut(), used);
        let out_of_instructions = flag.get(&mut self.store).unwrap_i32() == 1;
        let r = r.map_err(|e| to_trap(&e, out_of_instructions));
        (r, used)
    }

    /// How an execution that returned `r` ends, once its page tracking ends (in the process that
    /// ran it, or in a fork that measured another cell): the fees of the pages the code touched since
    /// the last collection are charged (a message they take past its limit traps, as the replica's
    /// would have in the middle of it), and the heap is the host's again (`host::end_pages`; an
    /// error if the counts were lost).
    fn end_execution(store: &mut Store<Host>, r: wasmtime::Result<()>) -> wasmtime::Result<()> {
        let left = host::collect_pages(&mut *store);
        let ended = host::end_pages(&mut *store);
        match (r, ended) {
            (_, Err(lost)) => Err(wasmtime::Error::new(Trap::ContractViolation(lost))),
            (Ok(()), _) if left < 0 => Err(wasmtime::Error::new(Trap::OutOfInstructions)),
            (r, _) => r,
        }
    }

    /// The callback at index `fun` of the canister's function table.
    fn callback(&mut self, fun: u32) -> Result<wasmtime::TypedFunc<i32, ()>, Trap> {
        let table = self
            .instance
            .get_table(&mut self.store, instrument::TABLE_EXPORT)
            .ok_or_else(|| Trap::ContractViolation("a callback was given but the module has no table".into()))?;
        match table.get(&mut self.store, u64::from(fun)) {
            Some(wasmtime::Ref::Func(Some(f))) => {
                f.typed::<i32, ()>(&self.store).map_err(|e| Trap::ContractViolation(format!("callback {fun}: {e}")))
            }
            _ => Err(Trap::ContractViolation(format!("callback {fun}: no function at this table index"))),
        }
    }

    fn snapshot(&mut self) -> Snapshot {
        let heap = self.memory().map(|m| m.data(&self.store).to_vec()).unwrap_or_default();
        Snapshot { heap, globals: self.globals() }
    }

    /// The persistent globals' values.
    fn globals(&mut self) -> Vec<(u32, Val)> {
        self.code
            .info
            .persistent_globals
            .clone()
            .into_iter()
            .map(|g| {
                let name = format!("{}{g}", instrument::PERSISTENT_GLOBAL_PREFIX);
                let v =
                    self.instance.get_global(&mut self.store, &name).expect("persistent global").get(&mut self.store);
                (g, v)
            })
            .collect()
    }

    fn set_globals(&mut self, globals: Vec<(u32, Val)>) {
        for (g, v) in globals {
            let name = format!("{}{g}", instrument::PERSISTENT_GLOBAL_PREFIX);
            self.instance
                .get_global(&mut self.store, &name)
                .expect("persistent global")
                .set(&mut self.store, v)
                .expect("restore global");
        }
    }

    /// Takes the heap's committed image afresh (after install, upgrade, restore), if the module
    /// tracks the pages it writes, and clears the map of written pages.
    fn recommit(&mut self) {
        if !self.code.info.tracks_heap {
            return;
        }
        let heap = self.memory().map(|m| m.data(&self.store).to_vec()).unwrap_or_default();
        if let Some(map) = self.instance.get_memory(&mut self.store, instrument::DIRTY_EXPORT) {
            map.data_mut(&mut self.store).fill(0);
        }
        self.committed = Some(heap);
    }

    /// The pages the execution wrote (the map's entries below the heap's end), the map cleared.
    fn take_written(&mut self) -> Vec<usize> {
        let pages = self.heap_bytes() as usize / TRACKED_PAGE;
        let Some(map) = self.instance.get_memory(&mut self.store, instrument::DIRTY_EXPORT) else {
            return Vec::new();
        };
        let map = map.data_mut(&mut self.store);
        // The map covers up to two entries past the heap (a store in the last page marks the
        // next one): clear them too.
        let used = (pages + 2).min(map.len());
        let mut written = Vec::new();
        for (chunk, bytes) in map[..used].chunks_mut(8).enumerate() {
            if bytes.iter().all(|b| *b == 0) {
                continue;
            }
            for (i, b) in bytes.iter_mut().enumerate() {
                if *b != 0 {
                    *b = 0;
                    let p = chunk * 8 + i;
                    if p < pages {
                        written.push(p);
                    }
                }
            }
        }
        written
    }

    /// Undoes an execution of a tracked heap: the pages it wrote from the committed image and
    /// the globals; if it grew the heap (wasm memory cannot shrink), a fresh instance with the
    /// committed image.
    fn undo_tracked(&mut self, globals: Vec<(u32, Val)>) {
        let written = self.take_written();
        let committed = self.committed.take().expect("a tracked heap has a committed image");
        if self.heap_bytes() as usize != committed.len() {
            self.restore(Snapshot { heap: committed, globals });
            return;
        }
        if let Some(mem) = self.memory() {
            let heap = mem.data_mut(&mut self.store);
            for p in written {
                let r = p * TRACKED_PAGE..(p + 1) * TRACKED_PAGE;
                heap[r.clone()].copy_from_slice(&committed[r]);
            }
        }
        self.committed = Some(committed);
        self.set_globals(globals);
        self.check_committed("undoing an execution");
    }

    /// Keeps an execution of a tracked heap: the pages it wrote, and any growth, into the
    /// committed image.
    fn commit_tracked(&mut self) {
        let written = self.take_written();
        let mut committed = self.committed.take().expect("a tracked heap has a committed image");
        if let Some(mem) = self.memory() {
            let heap = mem.data(&self.store);
            let old = committed.len();
            if heap.len() > old {
                committed.extend_from_slice(&heap[old..]);
            }
            for p in written.into_iter().filter(|p| (p + 1) * TRACKED_PAGE <= old) {
                let r = p * TRACKED_PAGE..(p + 1) * TRACKED_PAGE;
                committed[r.clone()].copy_from_slice(&heap[r]);
            }
        }
        self.committed = Some(committed);
        self.check_committed("keeping an execution");
    }

    /// With [`checking_heap`]: panics unless the heap equals its committed image, naming the
    /// first page that differs (a write the map missed).
    fn check_committed(&mut self, after: &str) {
        if !checking_heap() {
            return;
        }
        let mem = self.memory();
        let heap = mem.map_or(&[][..], |m| m.data(&self.store));
        let committed = self.committed.as_deref().unwrap_or_default();
        if heap != committed {
            let page = heap
                .chunks(TRACKED_PAGE)
                .zip(committed.chunks(TRACKED_PAGE))
                .position(|(a, b)| a != b)
                .map_or_else(|| format!("sizes {} and {}", heap.len(), committed.len()), |p| format!("page {p}"));
            panic!("heap tracking: after {after}, the heap differs from its committed image at {page}");
        }
    }

    fn take_host(&mut self) -> Host {
        let store = std::mem::replace(&mut self.store, Store::new(engine(), Host::new(Principal::anonymous(), vec![])));
        store.into_data()
    }

    /// A fresh instance with the snapshot's heap and globals (wasm memory cannot shrink, so
    /// going back means a new instance). Stable memory lives in the host and moves along.
    fn restore(&mut self, snap: Snapshot) {
        let host = self.take_host();
        let (store, instance) = instantiate(&self.code, host).expect("an instantiated module instantiates again");
        self.store = store;
        self.instance = instance;
        self.fill(snap);
    }

    /// Gives a fresh instance the snapshot's heap and globals; the snapshot's heap becomes the
    /// committed image of a tracked heap (no second copy).
    fn fill(&mut self, snap: Snapshot) {
        if let Some(mem) = self.memory() {
            let have = mem.data_size(&self.store) as u64;
            let want = snap.heap.len() as u64;
            if want > have {
                mem.grow(&mut self.store, (want - have) / host::WASM_PAGE).expect("grow the heap back");
            }
            mem.data_mut(&mut self.store)[..snap.heap.len()].copy_from_slice(&snap.heap);
        }
        self.set_globals(snap.globals);
        if self.code.info.tracks_heap && self.heap_bytes() == snap.heap.len() as u64 {
            // A fresh instance has written nothing yet: its map of written pages is clear.
            self.committed = Some(snap.heap);
        } else {
            self.recommit();
        }
    }

    /// Saves the canister (module, heap, globals, stable memory, settings) to `dir`, so that a
    /// later [`Canister::load`] continues where this one is.
    pub fn save(&mut self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let snap = self.snapshot();
        std::fs::write(dir.join("module.wasm"), &self.code.wasm)?;
        std::fs::write(dir.join("heap.bin"), &snap.heap)?;
        std::fs::write(dir.join("stable.bin"), self.stable_memory())?;
        let h = self.store.data();
        let state = SavedState {
            format: SAVED_STATE_FORMAT,
            canister_id: h.canister_id,
            controllers: h.controllers.clone(),
            cycles: h.cycles,
            version: h.version,
            timer: h.timer,
            messages: self.messages,
            time_offset: self.time_offset,
            raw_rand_calls: self.raw_rand_calls,
            metering: self.code.metering != Metering::Off,
            limits: self.opts.limits,
            wasm_memory_limit: h.wasm_memory_limit,
            memory_allocation: h.memory_allocation,
            env_vars: h.env_vars.clone(),
            cost_model: self.opts.cost_model,
            globals: snap.globals.iter().map(|(g, v)| Ok((*g, GlobalValue::of(v)?))).collect::<Result<_>>()?,
        };
        std::fs::write(dir.join("state.yml"), serde_yaml::to_string(&state)?)?;
        Ok(())
    }

    /// Loads a canister saved by [`Canister::save`].
    pub fn load(dir: &Path, print_output: bool) -> Result<Canister> {
        let text = std::fs::read_to_string(dir.join("state.yml"))
            .with_context(|| format!("no canister saved in {}", dir.display()))?;
        let state: SavedState = serde_yaml::from_str(&text).with_context(|| {
            format!(
                "{}: not a canister saved by this runner (format {SAVED_STATE_FORMAT}); install it again",
                dir.join("state.yml").display()
            )
        })?;
        if state.format != SAVED_STATE_FORMAT {
            bail!("{}: saved in format {}, this runner reads {SAVED_STATE_FORMAT}", dir.display(), state.format);
        }
        let metering = if state.metering { Metering::On } else { Metering::Off };
        let code = Code::from_file(&dir.join("module.wasm"), metering)?;
        let opts = Options {
            canister_id: state.canister_id,
            controllers: state.controllers,
            limits: state.limits,
            print_output,
            wasm_memory_limit: state.wasm_memory_limit,
            memory_allocation: state.memory_allocation,
            env_vars: state.env_vars,
            cost_model: state.cost_model,
            ic_from: host::IcFrom::Start,
        };
        let mut host = opts.host();
        host.cycles = state.cycles;
        host.version = state.version;
        host.timer = state.timer;
        host.stable = host::StableMemory::from_bytes(std::fs::read(dir.join("stable.bin"))?);
        let (store, instance) = instantiate(&code, host)?;
        let mut c = Canister {
            code,
            store,
            instance,
            opts,
            messages: state.messages,
            time_offset: state.time_offset,
            executions: 0,
            raw_rand_calls: state.raw_rand_calls,
            committed: None,
            last: false,
            touched: Default::default(),
            page_sets: Vec::new(),
        };
        let globals = state.globals.iter().map(|(g, v)| (*g, v.val())).collect();
        c.fill(Snapshot { heap: std::fs::read(dir.join("heap.bin"))?, globals });
        Ok(c)
    }
}

/// Version of `state.yml`; a runner refuses other versions instead of misreading them.
const SAVED_STATE_FORMAT: u32 = 2;

/// Everything of a canister that is not a memory or the module, as `state.yml`.
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedState {
    format: u32,
    canister_id: Principal,
    controllers: Vec<Principal>,
    cycles: u128,
    version: u64,
    timer: u64,
    messages: u64,
    time_offset: u64,
    raw_rand_calls: u64,
    metering: bool,
    limits: Limits,
    wasm_memory_limit: u64,
    /// Saved before memory allocations existed: none.
    #[serde(default)]
    memory_allocation: u64,
    env_vars: Vec<(String, String)>,
    /// Saved before the cost models existed: canbench.
    #[serde(default)]
    cost_model: CostModel,
    globals: Vec<(u32, GlobalValue)>,
}

/// A mutable global's value, floats as their bits so that they round-trip exactly.
#[derive(serde::Serialize, serde::Deserialize)]
enum GlobalValue {
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
}

impl GlobalValue {
    fn of(v: &Val) -> Result<GlobalValue> {
        Ok(match v {
            Val::I32(x) => GlobalValue::I32(*x),
            Val::I64(x) => GlobalValue::I64(*x),
            Val::F32(bits) => GlobalValue::F32(*bits),
            Val::F64(bits) => GlobalValue::F64(*bits),
            other => bail!("cannot save a global of type {other:?}"),
        })
    }

    fn val(&self) -> Val {
        match *self {
            GlobalValue::I32(x) => Val::I32(x),
            GlobalValue::I64(x) => Val::I64(x),
            GlobalValue::F32(bits) => Val::F32(bits),
            GlobalValue::F64(bits) => Val::F64(bits),
        }
    }
}

/// wasmtime's error as an anyhow error, keeping its message chain.
/// How an execution that failed with `e` trapped (`out_of_instructions`: the counter's flag).
fn to_trap(e: &wasmtime::Error, out_of_instructions: bool) -> Trap {
    if let Some(t) = e.downcast_ref::<Trap>() {
        t.clone()
    } else if out_of_instructions {
        Trap::OutOfInstructions
    } else if let Some(t) = e.downcast_ref::<wasmtime::Trap>() {
        Trap::Canister(format!("{t}"))
    } else {
        Trap::Canister(format!("{e:#}"))
    }
}

fn wt(e: wasmtime::Error) -> anyhow::Error {
    anyhow!("{e:?}")
}

fn instantiate(code: &Code, host: Host) -> Result<(Store<Host>, Instance)> {
    try_instantiate(code, host).map_err(|b| b.0)
}

/// Instantiates `code` in a new store holding `host`; on failure the host comes back, so no
/// state (stable memory above all) is lost with the store.
/// Why instantiating failed, with the host handed back (boxed: a `Host` is large).
type Failed = Box<(anyhow::Error, Host)>;

fn try_instantiate(code: &Code, host: Host) -> Result<(Store<Host>, Instance), Failed> {
    let mut store = Store::new(engine(), host);
    store.limiter(|h| h);
    let instance = match code.linker.instantiate(&mut store, &code.module) {
        Ok(i) => i,
        Err(e) => return Err(Box::new((wt(e).context("instantiating the module"), store.into_data()))),
    };
    let Some(counter) = instance.get_global(&mut store, instrument::COUNTER_EXPORT) else {
        return Err(Box::new((anyhow!("no counter global"), store.into_data())));
    };
    let memory = instance.get_memory(&mut store, instrument::MEMORY_EXPORT);
    let dirty = instance.get_memory(&mut store, instrument::DIRTY_EXPORT);
    let mut pages = instance.get_memory(&mut store, instrument::PAGES_READ_EXPORT).map(|read| {
        host::PageSource::Marks(host::PageMaps {
            read,
            written: instance
                .get_memory(&mut store, instrument::PAGES_WRITTEN_EXPORT)
                .expect("the map of pages written"),
        })
    });
    #[cfg(unix)]
    if let (true, Some(heap)) = (code.info.page_faults, memory) {
        let Some(tracker) = crate::faults::tracker_of(heap.data_ptr(&store)) else {
            let e =
                anyhow!("pages are counted by faults, but the heap is not a memory of the runner's (crate::faults)");
            return Err(Box::new((e, store.into_data())));
        };
        let handler = tracker.clone();
        // SAFETY: the handler is async-signal-safe (`Tracker::on_fault`: atomics and mprotect),
        // and wasmtime hands it the kernel's siginfo.
        unsafe {
            wasmtime::unix::StoreExt::set_signal_handler(&mut store, move |signum, info, _| {
                handler.on_fault(signum, info)
            });
        }
        pages = Some(host::PageSource::Faults(tracker));
    }
    store.data_mut().bind(counter, memory, dirty, pages);
    Ok((store, instance))
}
