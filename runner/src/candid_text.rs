//! Candid text arguments and replies, through the candid ecosystem's own parser. When the
//! canister embeds its interface (`candid:service` metadata) or one is given, arguments are typed
//! by the method's signature (so `(0, 10)` becomes two `nat64` when the method takes `nat64`) and
//! replies are printed with field names, as `dfx canister call` does.

use anyhow::{anyhow, Context, Result};
use candid::types::{Type, TypeEnv};
use candid::IDLArgs;

/// A canister's Candid interface.
pub struct Interface {
    env: TypeEnv,
    actor: Type,
}

impl Interface {
    /// Parses a `.did` text.
    pub fn parse(did: &str) -> Result<Interface> {
        let (env, actor) =
            candid_parser::utils::CandidSource::Text(did).load().context("parsing the Candid interface")?;
        let actor = actor.ok_or_else(|| anyhow!("the Candid interface has no service"))?;
        Ok(Interface { env, actor })
    }

    /// Whether `method` is a query according to the interface.
    pub fn is_query(&self, method: &str) -> Result<bool> {
        let f = self.env.get_method(&self.actor, method).map_err(|e| anyhow!("{e}"))?;
        Ok(f.is_query())
    }
}

/// Encodes Candid text `args` (e.g. `(0, 10_000)`) for `method`, typed by `iface` if given.
pub fn encode_args(args: &str, method: &str, iface: Option<&Interface>) -> Result<Vec<u8>> {
    let parsed =
        candid_parser::parse_idl_args(args).with_context(|| format!("parsing the Candid arguments {args:?}"))?;
    Ok(match iface {
        Some(i) => {
            let f = i.env.get_method(&i.actor, method).map_err(|e| anyhow!("{e}"))?;
            pad_optional(parsed, &i.env, &f.args)
                .to_bytes_with_types(&i.env, &f.args)
                .with_context(|| format!("the arguments do not fit {method}'s signature"))?
        }
        None => parsed.to_bytes()?,
    })
}

/// Decodes a reply of `method` to Candid text, typed by `iface` if given.
pub fn decode_reply(bytes: &[u8], method: &str, iface: Option<&Interface>) -> Result<String> {
    let args = match iface {
        Some(i) => {
            let f = i.env.get_method(&i.actor, method).map_err(|e| anyhow!("{e}"))?;
            IDLArgs::from_bytes_with_types(bytes, &i.env, &f.rets)?
        }
        None => IDLArgs::from_bytes(bytes)?,
    };
    Ok(args.to_string())
}

/// Encodes Candid text `args` for `canister_init` / `canister_post_upgrade`, typed by the
/// service's init arguments (`service : (init) -> {...}`) if the interface declares them.
pub fn encode_init_args(args: &str, iface: Option<&Interface>) -> Result<Vec<u8>> {
    let parsed =
        candid_parser::parse_idl_args(args).with_context(|| format!("parsing the Candid arguments {args:?}"))?;
    match iface.map(|i| (i, i.actor.as_ref())) {
        Some((i, candid::types::TypeInner::Class(init, _))) => Ok(pad_optional(parsed, &i.env, init)
            .to_bytes_with_types(&i.env, init)
            .context("the arguments do not fit the init signature")?),
        _ => Ok(parsed.to_bytes()?),
    }
}

/// Appends `null` for missing trailing arguments of type `opt` (or `null`, `reserved`), as
/// `dfx canister call` does: `()` is a valid argument for `(opt InitArgs)`.
fn pad_optional(mut args: IDLArgs, env: &TypeEnv, types: &[Type]) -> IDLArgs {
    use candid::types::TypeInner;
    while args.args.len() < types.len() {
        let ty = env.trace_type(&types[args.args.len()]).unwrap_or_else(|_| types[args.args.len()].clone());
        match ty.as_ref() {
            TypeInner::Opt(_) | TypeInner::Null | TypeInner::Reserved => args.args.push(candid::IDLValue::None),
            _ => break,
        }
    }
    args
}
