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

use crate::host::{self, executed, Host, Kind, Message, Trap};
use crate::instrument::{self, Instrumented, Metering, START_EXPORT};

/// Instruction limits per execution kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    pub const BENCHMARK: Limits =
        Limits { install: ic::INSTALL_INSTRUCTION_LIMIT, update: 99_999_999_999_999, query: 99_999_999_999_999 };
}

/// The canister id canbench's PocketIC gives the first canister (`lxzze-o7777-77777-aaaaa-cai`).
pub fn default_canister_id() -> Principal {
    Principal::from_text("lxzze-o7777-77777-aaaaa-cai").expect("valid principal")
}

/// The controller the runner installs canisters with unless told otherwise (a fixed,
/// non-anonymous principal, so that anonymous calls are non-controller calls as on the IC).
pub fn default_controller() -> Principal {
    Principal::from_text("hpikg-6exdt-jn33w-ndty3-fc7jc-tl2lr-buih3-cs3y7-tftkp-sfp62-gqe").expect("valid principal")
}

/// 2021-05-06T19:17:10Z, the time PocketIC starts at, in ns since 1970.
pub const START_TIME_NS: u64 = 1_620_328_630_000_000_000;

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
}

impl Default for Options {
    fn default() -> Self {
        Options {
            canister_id: default_canister_id(),
            controllers: vec![default_controller()],
            limits: Limits::PRODUCTION,
            print_output: false,
        }
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
        let wasm = maybe_gunzip(wasm)?;
        let info = instrument::instrument(&wasm, metering).context("instrumenting the wasm")?;
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
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        Code::new(&bytes, metering).with_context(|| format!("loading {}", path.display()))
    }

    /// True if the module exports `name`.
    pub fn exports(&self, name: &str) -> bool {
        self.exports.iter().any(|e| e == name)
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

/// Saved heap and globals, to go back to the state before a message.
struct Snapshot {
    heap: Vec<u8>,
    globals: Vec<(u32, Val)>,
}

/// A canister: its code, its live wasmtime instance and its stable memory.
pub struct Canister {
    code: Arc<Code>,
    store: Store<Host>,
    instance: Instance,
    opts: Options,
    messages: u64,
}

impl Canister {
    /// Creates and installs a canister: `start`, then `canister_init(arg)`, within the install
    /// limit. A trap leaves nothing: the error says why.
    pub fn install(code: Arc<Code>, arg: &[u8], opts: Options) -> Result<(Canister, Outcome)> {
        let mut host = Host::new(opts.canister_id, opts.controllers.clone());
        host.print_output = opts.print_output;
        let (store, instance) = instantiate(&code, host)?;
        let mut c = Canister { code, store, instance, opts, messages: 0 };
        let limit = c.opts.limits.install;
        c.begin(Kind::Init, arg.to_vec(), Principal::anonymous());
        let started = Instant::now();
        let (r, used) = c.run_install_steps(&[START_EXPORT, "canister_init"], Kind::Init, limit);
        let out = c.finish(r.map(|_| Vec::new()).map_err(Reject::Trapped), used, started);
        if let Err(e) = &out.result {
            bail!("install failed: {e}");
        }
        c.store.data_mut().version = 1;
        Ok((c, out))
    }

    /// Runs update `method` with Candid-encoded `arg` from `caller`. If the canister traps,
    /// every change of the message is undone.
    pub fn update(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.message(Kind::Update, &format!("canister_update {method}"), method, arg, caller)
    }

    /// Runs query `method`; its changes are always undone.
    pub fn query(&mut self, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        self.message(Kind::Query, &format!("canister_query {method}"), method, arg, caller)
    }

    /// Upgrades to `code`: `pre_upgrade` on the old instance, a fresh instance of the new module
    /// (heap discarded, stable memory kept), `start`, `post_upgrade(arg)`, all within one install
    /// limit. On a trap the canister is left exactly as before.
    pub fn upgrade(&mut self, code: Arc<Code>, arg: &[u8]) -> Outcome {
        let limit = self.opts.limits.install;
        let snap = self.snapshot();
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
        }
        self.finish(r.map(|_| Vec::new()).map_err(Reject::Trapped), used, started)
    }

    /// An independent copy of this canister in its current state (heap, globals, stable memory,
    /// settings), with its own wasmtime instance, so that it can run on another thread.
    pub fn fork(&mut self) -> Result<Canister> {
        let snap = self.snapshot();
        let h = self.store.data();
        let mut host = Host::new(h.canister_id, h.controllers.clone());
        host.cycles = h.cycles;
        host.version = h.version;
        host.timer = h.timer;
        host.certified_data = h.certified_data.clone();
        host.log_used = h.log_used;
        host.print_output = h.print_output;
        host.stable = host::StableMemory::from_bytes(h.stable.bytes.clone());
        let (store, instance) = instantiate(&self.code, host)?;
        let mut c =
            Canister { code: self.code.clone(), store, instance, opts: self.opts.clone(), messages: self.messages };
        c.restore(snap);
        Ok(c)
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

    /// The code the canister runs.
    pub fn code(&self) -> &Arc<Code> {
        &self.code
    }

    /// The options the canister was set up with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    fn time(&self) -> u64 {
        // Constant within a message, one millisecond later for each message.
        START_TIME_NS + self.messages * 1_000_000
    }

    fn memory(&mut self) -> Option<wasmtime::Memory> {
        self.instance.get_memory(&mut self.store, instrument::MEMORY_EXPORT)
    }

    fn begin(&mut self, kind: Kind, arg: Vec<u8>, caller: Principal) {
        let time = self.time();
        let h = self.store.data_mut();
        h.msg = Message::new(kind, arg, caller, time);
        h.stable.begin(kind);
        h.output.clear();
        h.profile = None;
    }

    fn message(&mut self, kind: Kind, export: &str, method: &str, arg: &[u8], caller: Principal) -> Outcome {
        let refused = if arg.len() as u64 > MAX_INGRESS_BYTES {
            Some(Reject::TooLarge { bytes: arg.len() as u64, limit: MAX_INGRESS_BYTES })
        } else if !self.code.exports(export) {
            Some(Reject::NoSuchMethod(method.to_string()))
        } else {
            None
        };
        if let Some(reject) = refused {
            return Outcome {
                result: Err(reject),
                instructions: 0,
                dirtied_pages: 0,
                heap_bytes: self.heap_bytes(),
                stable_bytes: self.stable_memory().len() as u64,
                output: Vec::new(),
                wall: Duration::ZERO,
            };
        }
        let limit = if kind == Kind::Query { self.opts.limits.query } else { self.opts.limits.update };
        let snap = self.snapshot();
        self.begin(kind, arg.to_vec(), caller);
        let started = Instant::now();
        let (r, used) = self.call(export, limit);
        let result = r.map_err(Reject::Trapped).and_then(|()| {
            let m = &mut self.store.data_mut().msg;
            match (&m.rejected, m.replied) {
                (Some(msg), _) => Err(Reject::Rejected(msg.clone())),
                (None, true) => Ok(std::mem::take(&mut m.reply)),
                (None, false) => Err(Reject::DidNotReply),
            }
        });
        let mut out = self.finish(result, used, started);
        if kind == Kind::Query || matches!(out.result, Err(Reject::Trapped(_))) {
            self.store.data_mut().stable.rollback();
            self.restore(snap);
            out.heap_bytes = self.heap_bytes();
            out.stable_bytes = self.stable_memory().len() as u64;
        }
        out
    }

    fn finish(&mut self, result: Result<Vec<u8>, Reject>, instructions: u64, started: Instant) -> Outcome {
        // The clock moves with replicated executions; a query leaves it (like everything) as it was.
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
        }
    }

    /// Runs the exported steps that exist, one after the other, sharing `limit`.
    fn run_install_steps(&mut self, steps: &[&str], kind: Kind, limit: u64) -> (Result<(), Trap>, u64) {
        let mut used = 0;
        for step in steps {
            let k = if *step == START_EXPORT { Kind::Start } else { kind };
            self.store.data_mut().msg.kind = k;
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
            self.call(export, limit)
        } else {
            (Ok(()), 0)
        }
    }

    /// Calls `export` with the counter set to `limit`; returns how it ended and the
    /// instructions it executed.
    fn call(&mut self, export: &str, limit: u64) -> (Result<(), Trap>, u64) {
        let counter = self.instance.get_global(&mut self.store, instrument::COUNTER_EXPORT).expect("counter export");
        let flag = self
            .instance
            .get_global(&mut self.store, instrument::OUT_OF_INSTRUCTIONS_FLAG_EXPORT)
            .expect("flag export");
        counter.set(&mut self.store, Val::I64(limit.min(i64::MAX as u64) as i64)).expect("set counter");
        flag.set(&mut self.store, Val::I32(0)).expect("set flag");
        self.store.data_mut().limit = limit;
        let func = match self.instance.get_typed_func::<(), ()>(&mut self.store, export) {
            Ok(f) => f,
            Err(e) => return (Err(Trap::ContractViolation(format!("{export}: {e}"))), 0),
        };
        let store = &mut self.store;
        let r = std::thread::scope(|s| {
            std::thread::Builder::new()
                .stack_size(THREAD_STACK)
                .spawn_scoped(s, move || func.call(store, ()))
                .expect("spawn the execution thread")
                .join()
                .expect("the execution thread panicked")
        });
        let used = executed(limit, counter.get(&mut self.store).unwrap_i64());
        crate::profile::end_call(self.store.data_mut(), used);
        let r = r.map_err(|e| {
            if let Some(t) = e.downcast_ref::<Trap>() {
                t.clone()
            } else if flag.get(&mut self.store).unwrap_i32() == 1 {
                Trap::OutOfInstructions
            } else if let Some(t) = e.downcast_ref::<wasmtime::Trap>() {
                Trap::Canister(format!("{t}"))
            } else {
                Trap::Canister(format!("{e:#}"))
            }
        });
        (r, used)
    }

    fn snapshot(&mut self) -> Snapshot {
        let heap = self.memory().map(|m| m.data(&self.store).to_vec()).unwrap_or_default();
        let globals = self
            .code
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
            .collect();
        Snapshot { heap, globals }
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
        if let Some(mem) = self.memory() {
            let have = mem.data_size(&self.store) as u64;
            let want = snap.heap.len() as u64;
            if want > have {
                mem.grow(&mut self.store, (want - have) / host::WASM_PAGE).expect("grow the heap back");
            }
            mem.data_mut(&mut self.store)[..snap.heap.len()].copy_from_slice(&snap.heap);
        }
        for (g, v) in snap.globals {
            let name = format!("{}{g}", instrument::PERSISTENT_GLOBAL_PREFIX);
            self.instance
                .get_global(&mut self.store, &name)
                .expect("persistent global")
                .set(&mut self.store, v)
                .expect("restore global");
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
            canister_id: h.canister_id.to_text(),
            controllers: h.controllers.iter().map(|p| p.to_text()).collect(),
            cycles: h.cycles.to_string(),
            version: h.version,
            timer: h.timer,
            log_used: h.log_used,
            messages: self.messages,
            metering: self.code.metering != Metering::Off,
            limits: [self.opts.limits.install, self.opts.limits.update, self.opts.limits.query],
            globals: snap.globals.iter().map(|(g, v)| (*g, val_to_bits(v))).collect(),
        };
        std::fs::write(dir.join("state.yml"), serde_yaml::to_string(&state)?)?;
        Ok(())
    }

    /// Loads a canister saved by [`Canister::save`].
    pub fn load(dir: &Path, print_output: bool) -> Result<Canister> {
        let state: SavedState = serde_yaml::from_str(
            &std::fs::read_to_string(dir.join("state.yml"))
                .with_context(|| format!("no canister saved in {}", dir.display()))?,
        )?;
        let metering = if state.metering { Metering::On } else { Metering::Off };
        let code = Code::from_file(&dir.join("module.wasm"), metering)?;
        let controllers = state.controllers.iter().map(Principal::from_text).collect::<Result<Vec<_>, _>>()?;
        let canister_id = Principal::from_text(&state.canister_id)?;
        let mut host = Host::new(canister_id, controllers.clone());
        host.cycles = state.cycles.parse()?;
        host.version = state.version;
        host.timer = state.timer;
        host.log_used = state.log_used;
        host.print_output = print_output;
        host.stable = host::StableMemory::from_bytes(std::fs::read(dir.join("stable.bin"))?);
        let (store, instance) = instantiate(&code, host)?;
        let [install, update, query] = state.limits;
        let opts = Options { canister_id, controllers, limits: Limits { install, update, query }, print_output };
        let mut c = Canister { code, store, instance, opts, messages: state.messages };
        let globals = state.globals.iter().map(|(g, bits)| Ok((*g, bits_to_val(bits)?))).collect::<Result<Vec<_>>>()?;
        c.restore(Snapshot { heap: std::fs::read(dir.join("heap.bin"))?, globals });
        Ok(c)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SavedState {
    canister_id: String,
    controllers: Vec<String>,
    cycles: String,
    version: u64,
    timer: u64,
    log_used: u64,
    messages: u64,
    metering: bool,
    limits: [u64; 3],
    globals: Vec<(u32, String)>,
}

fn val_to_bits(v: &Val) -> String {
    match v {
        Val::I32(x) => format!("i32:{x}"),
        Val::I64(x) => format!("i64:{x}"),
        Val::F32(x) => format!("f32:{x}"),
        Val::F64(x) => format!("f64:{x}"),
        other => format!("unsupported:{other:?}"),
    }
}

fn bits_to_val(s: &str) -> Result<Val> {
    let (ty, v) = s.split_once(':').ok_or_else(|| anyhow!("bad global {s:?}"))?;
    Ok(match ty {
        "i32" => Val::I32(v.parse()?),
        "i64" => Val::I64(v.parse()?),
        "f32" => Val::F32(v.parse()?),
        "f64" => Val::F64(v.parse()?),
        _ => bail!("cannot restore global {s:?}"),
    })
}

/// wasmtime's error as an anyhow error, keeping its message chain.
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
    let instance = match code.linker.instantiate(&mut store, &code.module) {
        Ok(i) => i,
        Err(e) => return Err(Box::new((wt(e).context("instantiating the module"), store.into_data()))),
    };
    let Some(counter) = instance.get_global(&mut store, instrument::COUNTER_EXPORT) else {
        return Err(Box::new((anyhow!("no counter global"), store.into_data())));
    };
    let memory = instance.get_memory(&mut store, instrument::MEMORY_EXPORT);
    store.data_mut().bind(counter, memory);
    Ok((store, instance))
}
