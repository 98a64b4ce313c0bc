//! Where a canister's Candid API is called, for the commands that drive a canister the way a dfx
//! user does (`live`, `load`): on this runner ([`Offline`]) or on a canister deployed with dfx
//! ([`Dfx`]). Both exchange the same Candid bytes: dfx gets them as hex through
//! `dfx canister call --type raw --output raw`, so a reply decodes the same way on either path.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{anyhow, bail, Context, Result};
use candid::utils::ArgumentEncoder;
use candid::{CandidType, Principal};
use serde::de::DeserializeOwned;

use crate::candid_text::{decode_reply, Interface};
use crate::canister::{Canister, Code, Options};
use crate::instrument::Metering;
use crate::replica::CostModel;

/// Where the canister runs.
pub trait Target {
    /// Calls `method` with Candid-encoded `arg`; the reply's Candid bytes.
    fn call(&mut self, method: &str, arg: Vec<u8>, query: bool) -> Result<Vec<u8>>;
    /// Upgrades the canister to the same wasm (the heap and every cache are new afterwards).
    fn upgrade(&mut self) -> Result<()>;
    /// The canister's Candid interface, to print replies and errors with their names.
    fn interface(&self) -> Option<Interface>;
}

/// A canister on this runner, called by its first controller (the runner's default controller
/// when the runner installed it).
pub struct Offline {
    canister: Canister,
    /// Where every update's result is saved, if anywhere.
    state: Option<PathBuf>,
}

/// The install and upgrade argument of the stablebench canisters: `null` for `opt InitArgs`
/// (the default profile at install, the profile in use at upgrade).
fn init_arg() -> Result<Vec<u8>> {
    Ok(candid::encode_one(None::<()>)?)
}

impl Offline {
    /// Installs `wasm` fresh, with the production limits (40 B per update, 5 B per query);
    /// nothing is saved.
    pub fn install(wasm: &Path) -> Result<Offline> {
        Offline::install_in(wasm, CostModel::Canbench)
    }

    /// [`Offline::install`], charging what `model` charges (`ic`: mainnet's memory tracker).
    pub fn install_in(wasm: &Path, model: CostModel) -> Result<Offline> {
        let code = Code::from_file(wasm, Metering::On)
            .with_context(|| format!("loading {} (build it with scripts/build.sh)", wasm.display()))?;
        let (canister, _) = Canister::install(code, &init_arg()?, Options { cost_model: model, ..Options::default() })?;
        Ok(Offline { canister, state: None })
    }

    /// The canister saved in `state` (by this command or `stablebench-runner install`/`call`),
    /// or, if `state` holds none, `wasm` installed like [`Offline::install`] and saved there. The
    /// canister is saved again after every update, so a run stopped halfway (Ctrl-C) continues
    /// from the last reply, as after a lost reply on the IC. The flag is true when it installed.
    pub fn open(state: &Path, wasm: &Path) -> Result<(Offline, bool)> {
        // `Canister::save` writes state.yml last: a directory without it holds no canister.
        if state.join("state.yml").is_file() {
            let canister = Canister::load(state, false)?;
            return Ok((Offline { canister, state: Some(state.to_path_buf()) }, false));
        }
        let mut target = Offline::install(wasm)?;
        target.canister.save(state).with_context(|| format!("saving the canister in {}", state.display()))?;
        target.state = Some(state.to_path_buf());
        Ok((target, true))
    }

    /// The caller of every call: the canister's first controller.
    fn caller(&self) -> Principal {
        self.canister.options().controllers[0]
    }

    fn save(&mut self) -> Result<()> {
        match &self.state {
            Some(dir) => self.canister.save(dir).with_context(|| format!("saving the canister in {}", dir.display())),
            None => Ok(()),
        }
    }
}

impl Target for Offline {
    fn call(&mut self, method: &str, arg: Vec<u8>, query: bool) -> Result<Vec<u8>> {
        let caller = self.caller();
        let out =
            if query { self.canister.query(method, &arg, caller) } else { self.canister.update(method, &arg, caller) };
        // A query's changes are discarded: only an update has something to save.
        if !query {
            self.save()?;
        }
        out.result.map_err(|e| anyhow!("{method} was rejected: {e}"))
    }

    fn upgrade(&mut self) -> Result<()> {
        let code = self.canister.code().clone();
        self.canister.upgrade(code, &init_arg()?).result.map_err(|e| anyhow!("upgrade failed: {e}"))?;
        self.save()
    }

    fn interface(&self) -> Option<Interface> {
        self.canister.code().candid_service().and_then(|did| Interface::parse(&did).ok())
    }
}

/// A canister deployed with dfx, called as the current dfx identity (a controller).
pub struct Dfx {
    network: Option<String>,
    canister: String,
    did: PathBuf,
}

impl Dfx {
    /// The dfx canister `canister` on `network` (dfx's default, the local replica, if `None`),
    /// whose interface is the file `did` (the one dfx.json names for it).
    pub fn new(network: Option<String>, canister: String, did: PathBuf) -> Dfx {
        Dfx { network, canister, did }
    }

    fn network_args(&self) -> Vec<String> {
        self.network.iter().flat_map(|n| ["--network".to_string(), n.clone()]).collect()
    }
}

impl Target for Dfx {
    fn call(&mut self, method: &str, arg: Vec<u8>, query: bool) -> Result<Vec<u8>> {
        let mut cmd = Command::new("dfx");
        cmd.args(["canister", "call"]).args(self.network_args()).args([&self.canister, method]);
        cmd.args([hex::encode(arg).as_str(), "--type", "raw", "--output", "raw"]);
        if query {
            cmd.arg("--query");
        }
        let out = cmd.output().context("running dfx (is it installed and on PATH?)")?;
        if !out.status.success() {
            bail!("dfx canister call {method} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        let text = String::from_utf8(out.stdout).context("dfx printed something other than hex")?;
        hex::decode(text.trim()).with_context(|| format!("dfx printed {text:?}, not the reply's hex"))
    }

    fn upgrade(&mut self) -> Result<()> {
        let status = Command::new("dfx")
            .arg("deploy")
            .args(self.network_args())
            .args([self.canister.as_str(), "--upgrade-unchanged"])
            .status()
            .context("running dfx deploy")?;
        if !status.success() {
            bail!("dfx deploy {} --upgrade-unchanged failed", self.canister);
        }
        Ok(())
    }

    /// The interface file (a relative path is read from the current directory: the scripts run
    /// from the repository's root).
    fn interface(&self) -> Option<Interface> {
        let did = std::fs::read_to_string(&self.did).ok()?;
        Interface::parse(&did).ok()
    }
}

/// Calls a method whose reply is `variant { Ok : R; Err : Error }` (every stablebench endpoint
/// that can fail) and returns its `Ok` value; see [`decode_ok`].
pub fn call<R: CandidType + DeserializeOwned>(
    target: &mut dyn Target,
    method: &str,
    arg: impl ArgumentEncoder,
    query: bool,
) -> Result<R> {
    let reply = target.call(method, candid::encode_args(arg)?, query)?;
    decode_ok(target, method, &reply)
}

/// The `Ok` value of `method`'s reply `variant { Ok : R; Err : Error }`, or its `Err` in Candid
/// text as an error. The runner does not link the canisters' `Error` type: the error decodes as
/// `reserved` and is printed through the target's interface.
pub fn decode_ok<R: CandidType + DeserializeOwned>(target: &dyn Target, method: &str, reply: &[u8]) -> Result<R> {
    let result: std::result::Result<R, candid::Reserved> =
        candid::decode_one(reply).with_context(|| format!("decoding the reply of {method}"))?;
    result.map_err(|_| {
        let text = decode_reply(reply, method, target.interface().as_ref()).unwrap_or_else(|e| e.to_string());
        anyhow!("{method} returned an error: {text}")
    })
}
