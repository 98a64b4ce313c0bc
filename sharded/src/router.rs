//! What a router canister of this crate does with its shards, shared by the key-value router
//! (`canister`) and the users/orders router (crate `stablebench-sharded-orders`): a call to a
//! shard answering `Result<_, Error>`, the same call to every shard, a batch split by shard, and the driver of a move between two shards (the protocol:
//! "Moving an entry between shards" in the crate's root), over the router's own log.

use std::cell::RefCell;
use std::collections::BTreeSet;

use candid::{CandidType, Deserialize, Principal};
use ic_cdk::call::Call;
use serde_bytes::ByteBuf;

use crate::{removes, Action, Error, Move, Stage};

/// Refuses a caller that is not a controller of this canister.
pub fn controller_only() -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    if ic_cdk::api::is_controller(&caller) {
        Ok(())
    } else {
        Err(Error::NotAuthorized { caller })
    }
}

/// Whether the caller may write to this shard (`role`): its router or a controller.
pub fn shard_writer(role: &Option<crate::Role>) -> Result<(), Error> {
    let caller = ic_cdk::api::msg_caller();
    crate::may_write(role, caller, ic_cdk::api::is_controller(&caller))
}

/// Asks every shard the same, all calls in flight together; the answers in shard order, or the
/// first shard's failure.
pub async fn fan_out<A: candid::utils::ArgumentEncoder, R: CandidType + for<'de> Deserialize<'de>>(
    shards: &[Principal],
    method: &str,
    args: &A,
) -> Result<Vec<R>, Error> {
    futures::future::join_all(shards.iter().map(|&shard| ask::<A, R>(shard, method, args))).await.into_iter().collect()
}

/// Sends each shard its part of `items` (`shard` gives an item's index in `shards`) as
/// `method(part)`, one call per shard that has a part, all in flight together; the sum of the
/// counts they answer, or a failure (`ShardFailed` or the shard's refusal; others may be done).
pub async fn scatter<T: CandidType + Clone>(
    shards: &[Principal],
    method: &str,
    items: Vec<T>,
    shard: impl Fn(&T) -> u32,
) -> Result<u64, Error> {
    let mut parts: Vec<Vec<T>> = vec![Vec::new(); shards.len()];
    for item in items {
        parts[shard(&item) as usize].push(item);
    }
    let calls = shards
        .iter()
        .zip(parts)
        .filter(|(_, part)| !part.is_empty())
        .map(|(&shard, part)| async move { ask::<_, u64>(shard, method, &(part,)).await });
    futures::future::join_all(calls).await.into_iter().sum()
}

/// The reject code of a call to a canister that does not exist.
const DESTINATION_INVALID: u32 = 3;

/// Calls `method` on `shard` with `args`, and decodes its `Result<R, Error>`.
pub async fn ask<A: candid::utils::ArgumentEncoder, R: CandidType + for<'de> Deserialize<'de>>(
    shard: Principal,
    method: &str,
    args: &A,
) -> Result<R, Error> {
    let failed = |code: u32, message: String| Error::ShardFailed { shard, code, message };
    let response = Call::unbounded_wait(shard, method).with_args(args).await.map_err(|e| match e {
        ic_cdk::call::CallFailed::CallRejected(r) => failed(r.raw_reject_code(), r.reject_message().to_string()),
        other => failed(0, other.to_string()),
    })?;
    response.candid::<Result<R, Error>>().map_err(|e| failed(0, format!("decoding its answer: {e}")))?
}

/// A router's log of unfinished moves (kept in stable memory), and what it knows of each: the
/// shards its keys live on, and what the value held on the source becomes on the destination.
pub trait MoveLog {
    /// Move `id`, if the log has it.
    fn load(&self, id: u64) -> Option<Move>;
    /// Records `m` (its stage).
    fn save(&self, m: Move);
    /// Removes move `id`, which is over.
    fn forget(&self, id: u64);
    /// The source's and the destination's shard.
    fn shards(&self, m: &Move) -> Result<(Principal, Principal), Error>;
    /// The value to place, from the value held (an error undoes the move).
    fn rewrite(&self, m: &Move, value: ByteBuf) -> Result<ByteBuf, Error>;
}

thread_local! {
    /// Moves a driver is working on now (heap: after an upgrade none is).
    static DRIVING: RefCell<BTreeSet<u64>> = const { RefCell::new(BTreeSet::new()) };
}

/// Whether a call is driving move `id` now.
pub fn driving(id: u64) -> bool {
    DRIVING.with_borrow(|d| d.contains(&id))
}

/// Marks move `id` as driven by this call until dropped (also when a trap drops the future: the
/// call's cleanup runs the drop), so that `recover` leaves it to this call.
struct Driving(u64);

impl Driving {
    fn start(id: u64) -> Option<Driving> {
        DRIVING.with_borrow_mut(|d| d.insert(id)).then_some(Driving(id))
    }
}

impl Drop for Driving {
    fn drop(&mut self) {
        DRIVING.with_borrow_mut(|d| d.remove(&self.0));
    }
}

/// Drives move `id` from its logged stage until it is over or a finish fails, recording each
/// stage before the calls it makes. Returns the last stage and the first error on the way.
pub async fn drive(log: &impl MoveLog, id: u64) -> (Stage, Option<Error>) {
    let Some(_driving) = Driving::start(id) else {
        let stage = log.load(id).map_or(Stage::Done, |m| m.stage);
        return (stage, Some(Error::InvalidArgument { message: format!("move {id} is being driven by another call") }));
    };
    let mut value: Option<ByteBuf> = None;
    let mut cause: Option<Error> = None;
    loop {
        let Some(m) = log.load(id) else {
            return (Stage::Aborted, Some(Error::InvalidArgument { message: format!("no move {id} in the log") }));
        };
        let (src, dst) = match log.shards(&m) {
            Ok(s) => s,
            Err(e) => return (m.stage, Some(e)),
        };
        let outcome: Result<(), Error> = match m.stage.action() {
            Action::Hold => ask::<_, ByteBuf>(src, "shard_hold", &(m.from.clone(), id)).await.map(|v| {
                value = Some(v);
            }),
            Action::Place => {
                let v = match value.take() {
                    Some(v) => Ok(v),
                    None => ask::<_, ByteBuf>(src, "shard_hold", &(m.from.clone(), id)).await,
                };
                match v.and_then(|v| log.rewrite(&m, v)) {
                    Ok(v) => ask::<_, ()>(dst, "shard_place", &(m.to.clone(), v, id)).await,
                    Err(e) => Err(e),
                }
            }
            Action::Finish { commit } => {
                let (a, b) = futures::future::join(
                    ask::<_, ()>(src, "shard_finish", &(m.from.clone(), id, removes(true, commit))),
                    ask::<_, ()>(dst, "shard_finish", &(m.to.clone(), id, removes(false, commit))),
                )
                .await;
                // A shard that no longer exists holds nothing to finish: done on its side.
                let gone = |r: Result<(), Error>| match r {
                    Err(Error::ShardFailed { code: DESTINATION_INVALID, .. }) => Ok(()),
                    other => other,
                };
                gone(a).and(gone(b))
            }
            Action::Nothing => {
                log.forget(id);
                return (m.stage, cause);
            }
        };
        let next = m.stage.after(outcome.is_ok());
        if let Err(e) = outcome {
            if next == m.stage {
                // The first failure says why the move stopped where it did.
                return (m.stage, cause.or(Some(e)));
            }
            cause.get_or_insert(e);
        }
        log.save(Move { stage: next, ..m });
    }
}

/// Drives the new move `id` (just logged at `Holding`) and answers as `move_entry` and
/// `move_order` do: `Ok` once done, the failure that undid it, or `MoveUnfinished` with the stage
/// a failure left it in.
pub async fn run(log: &impl MoveLog, id: u64) -> Result<(), Error> {
    match drive(log, id).await {
        (Stage::Done, _) => Ok(()),
        (Stage::Aborted, cause) => {
            Err(cause.unwrap_or_else(|| Error::InvalidArgument { message: format!("move {id} was undone") }))
        }
        (stage, cause) => Err(Error::MoveUnfinished {
            move_id: id,
            stage,
            cause: Box::new(cause.unwrap_or_else(|| Error::InvalidArgument { message: "stopped".into() })),
        }),
    }
}

/// Drives every move of `ids` no call is driving now on from its logged stage, together
/// (`recover`).
pub async fn recover(log: &impl MoveLog, ids: Vec<u64>) {
    futures::future::join_all(ids.into_iter().filter(|&id| !driving(id)).map(|id| drive(log, id))).await;
}
