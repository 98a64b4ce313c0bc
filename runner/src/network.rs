//! Several canisters together, as PocketIC runs them: canisters on one subnet or several, and the
//! calls between them delivered as messages of their own with the replica's semantics.
//!
//! - **Messages.** A call a canister performs is delivered to its callee as a new call context:
//!   its own execution, with its own instruction limit ([`crate::canister::Limits`]). The
//!   callee's reply, its `msg_reject`, or its trap (`CANISTER_ERROR`, the callee's changes
//!   undone) comes back to the caller's reply or reject callback, which runs in the caller's call
//!   context and may answer the caller's own caller. A callback that traps is undone and its
//!   cleanup callback runs. A call to a canister the network does not hold is rejected with
//!   `DESTINATION_INVALID`; a method the callee does not export with `CANISTER_ERROR`. The
//!   caller's executions before the call keep their changes whatever the callee does.
//! - **Cycles.** The caller pays for each call when it performs it: the call fee, its request
//!   bytes, and the prepayment for the largest response and the longest callback; the unused
//!   prepayment comes back with the response ([`CallFees`], [`stablebench_grid::ic::prices`]).
//!   Cycles attached to a call (`call_cycles_add`) move to the callee as far as it accepts them;
//!   the rest is refunded to the caller with the response. Every execution is charged to the
//!   canister that runs it (`update_cycles`), an ingress message's reception to its receiver.
//! - **Order and rounds.** Everything runs in one deterministic order: deliveries in the order of
//!   the round they are due in, then of their creation. [`Rounds`] is the model of when each is
//!   due (the scheduler's rules, with their sources), so that the latency of a call is reported
//!   in rounds.
//!
//! The network does not model queues filling up, the round's scheduling across many canisters,
//! composite queries or best-effort calls (a best-effort call is treated as a guaranteed one).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use candid::Principal;
use stablebench_grid::ic::{self, prices, PageCounts};

use crate::canister::{Canister, Code, Entry, Executed, Options, Reject};
use crate::host::{Call, Kind, Message, Trap};
use crate::replica::{reject_code, scheduler};

/// A subnet of the network, by number (0 is the first).
pub type SubnetId = u32;

/// When a delivery is due, in rounds (one round: one block of the subnet's consensus, executed).
/// See `docs/network.md` for the replica's rules this follows and their sources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rounds {
    /// Rounds from the end of the round a message is sent in (a request or a response) to the
    /// round it is executed in, when sender and receiver share a subnet: 0, the scheduler
    /// inducts subnet-local messages between the inner rounds of the round that sent them.
    pub same_subnet: u64,
    /// A system reject for a canister that does not exist: the request leaves through the
    /// subnet's loopback stream, and the reject reaches the caller this many rounds later.
    pub no_such_canister: u64,
    /// The same across subnets: the message goes into the stream at the end of its round, is
    /// certified with the state, and a later block of the receiving subnet inducts it.
    pub across_subnets: u64,
    /// Instructions one scheduler thread executes in a round: a canister runs on one thread, so
    /// the messages due to it once it has executed this many wait for the next round.
    pub round_instructions: u64,
    /// Threads a subnet executes canisters on: the messages due on a subnet that has executed
    /// `cores × round_instructions` in a round wait for the next.
    pub cores: u64,
    /// Instructions of one slice of a long execution (deterministic time slicing): an execution
    /// of `n` instructions takes `ceil(n / slice_instructions)` rounds.
    pub slice_instructions: u64,
}

impl Rounds {
    /// The replica's scheduling on application subnets (`docs/network.md` has the rules and
    /// their sources; the limits are [`crate::replica::scheduler`]'s).
    pub const REPLICA: Rounds = Rounds {
        same_subnet: 0,
        no_such_canister: 1,
        across_subnets: 2,
        round_instructions: scheduler::MAX_INSTRUCTIONS_PER_ROUND,
        cores: scheduler::SCHEDULER_CORES,
        slice_instructions: scheduler::MAX_INSTRUCTIONS_PER_SLICE,
    };

    /// Rounds an execution of `instructions` takes (at least one).
    pub fn of_execution(&self, instructions: u64) -> u64 {
        instructions.div_ceil(self.slice_instructions).max(1)
    }
}

/// What the caller pays for one call (`stablebench_grid::ic::prices`, on a subnet of `nodes`
/// nodes): [`CallFees::at_perform`] when it performs the call, less [`CallFees::refund`] when the
/// response comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallFees {
    /// Nodes of the caller's subnet.
    pub nodes: u64,
}

impl CallFees {
    /// The call fee and its request bytes (method name and argument).
    pub fn request(&self, call: &Call) -> u128 {
        let bytes = call.method.len() as u64 + call.arg.len() as u64;
        prices::scale(prices::XNET_CALL_CYCLES + prices::XNET_BYTE_CYCLES * bytes, self.nodes) as u128
    }

    /// Withdrawn at `call_perform`: the request, and the prepayment for the largest response and
    /// the longest callback (what `ic0.cost_call` reports, `prices::call_cycles`).
    pub fn at_perform(&self, call: &Call) -> u128 {
        prices::call_cycles(call.method.len() as u64, call.arg.len() as u64, self.nodes) as u128
    }

    /// The response's bytes, charged to the caller.
    pub fn transmission(&self, response_bytes: u64) -> u128 {
        prices::scale(prices::XNET_BYTE_CYCLES * response_bytes, self.nodes) as u128
    }

    /// The prepayment for the response: what `call_cycles` adds to the request.
    pub fn prepaid_response(&self) -> u128 {
        prices::call_cycles(0, 0, self.nodes) as u128 - prices::scale(prices::XNET_CALL_CYCLES, self.nodes) as u128
    }

    /// Returned with the response: the prepayment less the response's bytes and what its callback
    /// ran (`callback_instructions`; its base fee included).
    pub fn refund(&self, response_bytes: u64, callback_instructions: u64) -> u128 {
        let execution = prices::update_cycles_on(callback_instructions, self.nodes) as u128;
        self.prepaid_response().saturating_sub(self.transmission(response_bytes) + execution)
    }
}

/// What a call's callee answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// `msg_reply` with these bytes.
    Reply(Vec<u8>),
    /// A reject: its code ([`reject_code`]) and message.
    Reject(i32, String),
}

impl Response {
    /// The payload's bytes (reply data or reject message), what the response transmits.
    pub fn bytes(&self) -> u64 {
        match self {
            Response::Reply(b) => b.len() as u64,
            Response::Reject(_, m) => m.len() as u64,
        }
    }
}

/// One canister's part in an ingress message and everything it set off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Executions (the method, callees' methods, callbacks, cleanups).
    pub executions: u64,
    /// Their instructions, the ic model's page fees included.
    pub instructions: u64,
    /// The Wasm pages they touched, summed over executions.
    pub pages: PageCounts,
    /// Cycles charged for them: each execution's base fee and instructions.
    pub execution_cycles: u128,
    /// Cycles charged for the calls it made (fee, request and response bytes, net of refunds),
    /// the callbacks' execution excluded (in `execution_cycles`).
    pub call_cycles: u128,
    /// Cycles charged for receiving the ingress message.
    pub ingress_cycles: u128,
    /// Calls it performed.
    pub calls: u64,
    /// Payload bytes it sent: its requests' method names and arguments, and its responses.
    pub bytes_sent: u64,
    /// Cycles that moved to it (accepted) or away from it (attached and accepted by the callee):
    /// accepted minus given.
    pub cycles_transferred: i128,
}

impl Usage {
    /// Everything it was charged.
    pub fn cycles(&self) -> u128 {
        self.execution_cycles + self.call_cycles + self.ingress_cycles
    }
}

/// What an ingress message did across the network.
#[derive(Clone, Debug)]
pub struct Traced {
    /// Its reply, or why there is none.
    pub result: Result<Vec<u8>, Reject>,
    /// The round its reply was produced in (the ingress message executes in round 1).
    pub reply_round: u64,
    /// The last round anything it set off executed in.
    pub last_round: u64,
    /// Each canister's part, by id.
    pub canisters: BTreeMap<Principal, Usage>,
    /// Every execution, in the order they ran.
    pub log: Vec<Logged>,
}

impl Traced {
    /// Instructions of every execution.
    pub fn instructions(&self) -> u64 {
        self.canisters.values().map(|u| u.instructions).sum()
    }

    /// Cycles charged to every canister.
    pub fn cycles(&self) -> u128 {
        self.canisters.values().map(Usage::cycles).sum()
    }

    /// Payload bytes that moved between canisters.
    pub fn bytes_moved(&self) -> u64 {
        self.canisters.values().map(|u| u.bytes_sent).sum()
    }

    /// The canister's part (an empty one if it took none).
    pub fn usage(&self, canister: Principal) -> Usage {
        self.canisters.get(&canister).cloned().unwrap_or_default()
    }
}

/// One execution in a [`Traced`] log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// The canister that ran it.
    pub canister: Principal,
    /// What ran: the method, or `reply callback`, `reject callback`, `cleanup`.
    pub what: String,
    /// The round it started in.
    pub round: u64,
    /// Its instructions.
    pub instructions: u64,
    /// Why it trapped, if it did.
    pub trap: Option<String>,
    /// Its `debug_print` lines.
    pub output: Vec<String>,
}

/// Something a test makes happen at a round of the next ingress message ([`Network::schedule`]):
/// the faults and operations a sharded set must survive.
pub enum Event {
    /// The canister's next execution traps (as if it had trapped anywhere in it: everything it
    /// did is undone, its calls are not made).
    Trap(Principal),
    /// The canister is upgraded to `code` with `arg`, between two of its messages (without being
    /// stopped: messages on their way to it are delivered after the upgrade).
    Upgrade {
        /// The canister.
        canister: Principal,
        /// Its new code.
        code: Arc<Code>,
        /// The upgrade argument.
        arg: Vec<u8>,
    },
}

/// Where a call context's answer goes.
#[derive(Clone, Copy, Debug)]
enum Origin {
    /// The ingress message being traced.
    Ingress,
    /// A call: its caller and the caller's callback.
    Call { caller: Principal, callback: u64 },
}

/// An open call context of a canister.
struct Context {
    /// The reply state, caller and cycles as the last execution in it left them.
    msg: Message,
    origin: Origin,
    /// Calls performed in it whose responses have not come back.
    outstanding: u64,
    /// Its answer has gone out (the callbacks still to run cannot answer again).
    answered: bool,
}

/// A call a canister performed, waiting for its response.
struct Pending {
    context: u64,
    call: Call,
}

struct Node {
    canister: Canister,
    subnet: SubnetId,
    contexts: BTreeMap<u64, Context>,
    callbacks: BTreeMap<u64, Pending>,
    next_id: u64,
    /// The round from which it can start an execution (a long one occupies it until it ends).
    free_from: u64,
    /// Its next execution traps ([`Event::Trap`]).
    trap_next: bool,
}

impl Node {
    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

enum Delivery {
    Request { to: Principal, from: Principal, callback: u64, call: Call },
    Response { to: Principal, callback: u64, response: Response, refund: u128 },
}

impl Delivery {
    fn to(&self) -> Principal {
        match self {
            Delivery::Request { to, .. } | Delivery::Response { to, .. } => *to,
        }
    }
}

/// Upper bound on the executions one ingress message may set off (against canisters that call
/// each other forever).
const MAX_EXECUTIONS: usize = 100_000;

/// Canisters on one subnet or several, run together (see the module documentation).
pub struct Network {
    nodes: BTreeMap<Principal, Node>,
    /// Nodes of each subnet (for its fees).
    subnets: Vec<u64>,
    rounds: Rounds,
    /// Deliveries by (round due, creation order).
    queue: BTreeMap<(u64, u64), Delivery>,
    seq: u64,
    /// Instructions each subnet executed in each round.
    load: BTreeMap<(SubnetId, u64), u64>,
    /// Instructions each canister executed in each round.
    canister_load: BTreeMap<(Principal, u64), u64>,
    /// Events for the next ingress message, by (round, order scheduled).
    events: BTreeMap<(u64, u64), Event>,
    trace: Option<Traced>,
}

impl Network {
    /// A network of `subnets` subnets of 13 nodes each, scheduled as the replica does.
    pub fn new(subnets: u32) -> Network {
        Network::with_rounds(vec![prices::SUBNET_NODES; subnets as usize], Rounds::REPLICA)
    }

    /// A network of subnets with these node counts, scheduled by `rounds`.
    pub fn with_rounds(subnet_nodes: Vec<u64>, rounds: Rounds) -> Network {
        Network {
            nodes: BTreeMap::new(),
            subnets: subnet_nodes,
            rounds,
            queue: BTreeMap::new(),
            seq: 0,
            load: BTreeMap::new(),
            canister_load: BTreeMap::new(),
            events: BTreeMap::new(),
            trace: None,
        }
    }

    /// Installs `code` with `arg` as canister `opts.canister_id` on `subnet`.
    pub fn install(&mut self, code: Arc<Code>, arg: &[u8], opts: Options, subnet: SubnetId) -> Result<Principal> {
        let id = opts.canister_id;
        if self.nodes.contains_key(&id) {
            bail!("canister {id} is already installed");
        }
        if subnet as usize >= self.subnets.len() {
            bail!("subnet {subnet}: the network has {} subnets", self.subnets.len());
        }
        let (canister, _) = Canister::install(code, arg, opts)?;
        let node = Node {
            canister,
            subnet,
            contexts: BTreeMap::new(),
            callbacks: BTreeMap::new(),
            next_id: 0,
            free_from: 0,
            trap_next: false,
        };
        self.nodes.insert(id, node);
        Ok(id)
    }

    /// Canister `id`, to query, upgrade or inspect it between messages.
    pub fn canister(&mut self, id: Principal) -> Option<&mut Canister> {
        self.nodes.get_mut(&id).map(|n| &mut n.canister)
    }

    /// Removes canister `id` (as if it were deleted): calls to it are rejected from now on.
    pub fn remove(&mut self, id: Principal) -> Option<Canister> {
        self.nodes.remove(&id).map(|n| n.canister)
    }

    /// Makes `event` happen in `round` of the next ingress message ([`Network::update`]), before
    /// the deliveries due in that round; an event of a round the message does not reach happens
    /// after it.
    pub fn schedule(&mut self, round: u64, event: Event) {
        let order = self.events.len() as u64;
        self.events.insert((round, order), event);
    }

    /// Sends update `method` to canister `to` as an ingress message from `caller`, and runs
    /// everything it sets off until the network is idle.
    pub fn update(&mut self, to: Principal, method: &str, arg: &[u8], caller: Principal) -> Traced {
        self.queue.clear();
        self.load.clear();
        self.canister_load.clear();
        for node in self.nodes.values_mut() {
            node.free_from = 0;
        }
        self.trace = Some(Traced {
            result: Err(Reject::DidNotReply),
            reply_round: 0,
            last_round: 0,
            canisters: BTreeMap::new(),
            log: Vec::new(),
        });
        self.happen(1);
        self.ingress(to, method, arg, caller);
        while let Some(((round, _), delivery)) = self.queue.pop_first() {
            if self.events.keys().next().is_some_and(|&(r, _)| r <= round) {
                self.queue.insert((round, 0), delivery);
                self.happen(round);
                continue;
            }
            if self.trace().log.len() >= MAX_EXECUTIONS {
                self.trace_mut().result =
                    Err(Reject::Rejected(format!("more than {MAX_EXECUTIONS} executions: a call loop?")));
                self.queue.clear();
                break;
            }
            self.deliver(round, delivery);
        }
        self.happen(u64::MAX);
        // A trap the message never reached does not carry over to the next one.
        for node in self.nodes.values_mut() {
            node.trap_next = false;
        }
        self.trace.take().expect("traced")
    }

    /// Makes the scheduled events of rounds up to `round` happen, in order.
    fn happen(&mut self, round: u64) {
        while let Some(entry) = self.events.first_entry() {
            if entry.key().0 > round {
                break;
            }
            let ((at, _), event) = entry.remove_entry();
            match event {
                Event::Trap(canister) => {
                    if let Some(node) = self.nodes.get_mut(&canister) {
                        node.trap_next = true;
                    }
                }
                Event::Upgrade { canister, code, arg } => {
                    let Some(node) = self.nodes.get_mut(&canister) else { continue };
                    let out = node.canister.upgrade(code, &arg);
                    let trace = self.trace_mut();
                    trace.log.push(Logged {
                        canister,
                        what: "upgrade".into(),
                        round: if at == u64::MAX { trace.last_round } else { at },
                        instructions: out.instructions,
                        trap: out.result.err().map(|e| e.to_string()),
                        output: out.output,
                    });
                }
            }
        }
    }

    /// Runs one execution on `canister`, or traps it if a test said so ([`Event::Trap`]).
    fn run(&mut self, canister: Principal, msg: Message, entry: Entry<'_>) -> Executed {
        let node = self.nodes.get_mut(&canister).expect("installed");
        if std::mem::take(&mut node.trap_next) {
            let trap = Trap::Canister("a trap the test injected".into());
            return Executed {
                trap: Some(trap),
                used: 0,
                msg,
                calls: Vec::new(),
                pages: PageCounts::default(),
                output: Vec::new(),
            };
        }
        node.canister.execute_message(msg, entry)
    }

    fn trace(&self) -> &Traced {
        self.trace.as_ref().expect("tracing an ingress message")
    }

    fn trace_mut(&mut self) -> &mut Traced {
        self.trace.as_mut().expect("tracing an ingress message")
    }

    fn usage(&mut self, canister: Principal) -> &mut Usage {
        self.trace_mut().canisters.entry(canister).or_default()
    }

    fn ingress(&mut self, to: Principal, method: &str, arg: &[u8], caller: Principal) {
        if arg.len() as u64 > crate::canister::MAX_INGRESS_BYTES {
            let limit = crate::canister::MAX_INGRESS_BYTES;
            self.trace_mut().result = Err(Reject::TooLarge { bytes: arg.len() as u64, limit });
            return;
        }
        let Some(node) = self.nodes.get_mut(&to) else {
            self.trace_mut().result = Err(Reject::Rejected(format!("Canister {to} not found")));
            return;
        };
        // A query method sent as an update call runs replicated: charged, its changes discarded.
        let Some((kind, export)) = node.canister.code().method_export(method) else {
            self.trace_mut().result = Err(Reject::NoSuchMethod(method.to_string()));
            return;
        };
        let nodes = self.subnets[node.subnet as usize];
        let fee = prices::ingress_cycles(method.len() as u64 + arg.len() as u64, nodes) as u128;
        node.canister.set_cycles(node.canister.cycles().saturating_sub(fee));
        self.usage(to).ingress_cycles += fee;
        let mut msg = Message::new(kind, arg.to_vec(), caller, 0);
        // A query sent as an update call replies as an update does: at most 2 MiB.
        msg.max_reply = ic::MAX_UPDATE_REPLY_BYTES;
        self.start(to, 1, Origin::Ingress, msg, &export, method);
    }

    /// Delivers `delivery` in `round`, or later if its subnet's round is full or its canister busy.
    fn deliver(&mut self, round: u64, delivery: Delivery) {
        let to = delivery.to();
        if let Some(node) = self.nodes.get(&to) {
            let subnet = self.load.get(&(node.subnet, round)).copied().unwrap_or(0);
            let canister = self.canister_load.get(&(to, round)).copied().unwrap_or(0);
            let full = subnet >= self.rounds.cores * self.rounds.round_instructions
                || canister >= self.rounds.round_instructions;
            let due = if full { round + 1 } else { round.max(node.free_from) };
            if due != round {
                self.enqueue(due, delivery);
                return;
            }
        }
        match delivery {
            Delivery::Request { to, from, callback, call } => self.request(round, to, from, callback, call),
            Delivery::Response { to, callback, response, refund } => {
                self.response(round, to, callback, response, refund)
            }
        }
    }

    fn enqueue(&mut self, round: u64, delivery: Delivery) {
        self.seq += 1;
        self.queue.insert((round, self.seq), delivery);
    }

    /// A request reaches its callee: a new call context, or a reject if there is none to run it.
    fn request(&mut self, round: u64, to: Principal, from: Principal, callback: u64, call: Call) {
        let origin = Origin::Call { caller: from, callback };
        let Some(node) = self.nodes.get_mut(&to) else {
            if to == Principal::management_canister() && call.method == "raw_rand" {
                let bytes = self.nodes.get_mut(&from).expect("the caller is installed").canister.raw_rand();
                return self.answer(round, origin, to, Response::Reply(bytes), call.cycles);
            }
            let text = format!("Canister {to} not found");
            return self.answer(
                round,
                origin,
                to,
                Response::Reject(reject_code::DESTINATION_INVALID, text),
                call.cycles,
            );
        };
        let Some((kind, export)) = node.canister.code().method_export(&call.method) else {
            let text = format!("Canister {to} has no update method '{}'", call.method);
            let reject = Response::Reject(reject_code::CANISTER_ERROR, text);
            return self.answer(round, origin, to, reject, call.cycles);
        };
        let mut msg = Message::new(kind, call.arg, from, 0);
        (msg.cycles_available, msg.max_reply) = (call.cycles, ic::MAX_INTER_CANISTER_PAYLOAD_BYTES);
        self.start(to, round, origin, msg, &export, &call.method);
    }

    /// Runs the first execution of a new call context of `to`.
    fn start(&mut self, to: Principal, round: u64, origin: Origin, mut msg: Message, export: &str, what: &str) {
        let node = self.nodes.get_mut(&to).expect("delivered to an installed canister");
        let context = node.id();
        msg.time = node.canister.clock();
        let attached = msg.cycles_available;
        let e = self.run(to, msg, Entry::Export(export));
        let end = self.executed(to, round, what, &e, true);
        if let Some(trap) = e.trap {
            if let Origin::Ingress = origin {
                let trace = self.trace_mut();
                (trace.result, trace.reply_round) = (Err(Reject::Trapped(trap)), end);
                return;
            }
            let response = Response::Reject(reject_code::CANISTER_ERROR, format!("Canister {to} trapped: {trap}"));
            return self.answer(end, origin, to, response, attached);
        }
        self.accepted(to, origin, attached - e.msg.cycles_available);
        let ctx = Context { msg: e.msg, origin, outstanding: 0, answered: false };
        self.nodes.get_mut(&to).expect("installed").contexts.insert(context, ctx);
        self.after(to, end, context, e.calls, None);
    }

    /// Books `accepted` cycles of a context of `canister` whose origin is `origin` as moved from
    /// the calling canister (none for an ingress message) to `canister`.
    fn accepted(&mut self, canister: Principal, origin: Origin, accepted: u128) {
        self.usage(canister).cycles_transferred += accepted as i128;
        if let Origin::Call { caller, .. } = origin {
            self.usage(caller).cycles_transferred -= accepted as i128;
        }
    }

    /// Books an execution that started in `round` (with the base fee of a message, or without:
    /// a cleanup runs in its callback's message); returns the round it ends in.
    fn executed(&mut self, canister: Principal, round: u64, what: &str, e: &Executed, base_fee: bool) -> u64 {
        let node = self.nodes.get_mut(&canister).expect("installed");
        let (subnet, nodes) = (node.subnet, self.subnets[node.subnet as usize]);
        let end = round + self.rounds.of_execution(e.used) - 1;
        node.free_from = end;
        let mut cycles = prices::update_cycles_on(e.used, nodes) as u128;
        if !base_fee {
            cycles -= prices::scale(prices::UPDATE_BASE_CYCLES, nodes) as u128;
        }
        node.canister.set_cycles(node.canister.cycles().saturating_sub(cycles));
        // Each slice counts in the round it runs in: full slices, then what is left in the last.
        let slice = self.rounds.slice_instructions.max(1);
        for r in round..=end {
            let part = if r < end { slice } else { e.used.saturating_sub(1) % slice + 1 };
            *self.load.entry((subnet, r)).or_default() += part;
            *self.canister_load.entry((canister, r)).or_default() += part;
        }
        let usage = self.usage(canister);
        usage.executions += 1;
        usage.instructions += e.used;
        usage.pages = usage.pages.plus(&e.pages);
        usage.execution_cycles += cycles;
        let trace = self.trace_mut();
        trace.last_round = trace.last_round.max(end);
        trace.log.push(Logged {
            canister,
            what: what.to_string(),
            round,
            instructions: e.used,
            trap: e.trap.as_ref().map(Trap::to_string),
            output: e.output.clone(),
        });
        end
    }

    /// After an execution in context `context` of `canister` that ended in round `end`: performs
    /// its calls, then answers the context's origin if the execution answered, or if nothing is
    /// left that could (no call outstanding: `did not reply`); closes the context once it is
    /// answered and no call is outstanding.
    fn after(&mut self, canister: Principal, end: u64, context: u64, calls: Vec<Call>, trap: Option<Trap>) {
        for call in calls {
            self.perform(canister, end, context, call);
        }
        let node = self.nodes.get_mut(&canister).expect("installed");
        let ctx = node.contexts.get_mut(&context).expect("an open context");
        let trapped = trap.map(|t| (format!("Canister {canister} trapped: {t}"), t));
        let answer = match (&ctx.msg.rejected, ctx.msg.replied) {
            _ if ctx.answered => None,
            (Some(m), _) => Some(Response::Reject(reject_code::CANISTER_REJECT, m.clone())),
            (None, true) => Some(Response::Reply(ctx.msg.reply.clone())),
            // Nothing left that could answer: the context fails, with the last callback's trap if
            // it trapped.
            (None, false) if ctx.outstanding == 0 => Some(Response::Reject(
                reject_code::CANISTER_ERROR,
                match &trapped {
                    Some((text, _)) => text.clone(),
                    None => format!("Canister {canister} did not reply to the call"),
                },
            )),
            (None, false) => None,
        };
        let (origin, unaccepted) = (ctx.origin, ctx.msg.cycles_available);
        if answer.is_some() {
            ctx.answered = true;
            ctx.msg.cycles_available = 0;
        }
        if ctx.answered && ctx.outstanding == 0 {
            node.contexts.remove(&context);
        }
        match (answer, origin, trapped) {
            (Some(Response::Reject(reject_code::CANISTER_ERROR, _)), Origin::Ingress, Some((_, trap))) => {
                let trace = self.trace_mut();
                (trace.result, trace.reply_round) = (Err(Reject::Trapped(trap)), end);
            }
            (Some(response), _, _) => self.answer(end, origin, canister, response, unaccepted),
            (None, _, _) => {}
        }
    }

    /// Sends `canister`'s call, made in `context` in round `round`: its fees withdrawn, its cycles
    /// carried, its request due at the callee.
    fn perform(&mut self, canister: Principal, round: u64, context: u64, call: Call) {
        let node = self.nodes.get_mut(&canister).expect("installed");
        let fees = CallFees { nodes: self.subnets[node.subnet as usize] };
        let prepaid = fees.at_perform(&call);
        node.canister.set_cycles(node.canister.cycles().saturating_sub(prepaid));
        node.contexts.get_mut(&context).expect("an open context").outstanding += 1;
        let callback = node.id();
        let from_subnet = node.subnet;
        node.callbacks.insert(callback, Pending { context, call: call.clone() });
        let usage = self.usage(canister);
        usage.calls += 1;
        usage.call_cycles += prepaid;
        usage.bytes_sent += call.method.len() as u64 + call.arg.len() as u64;
        let due = round + self.hop(from_subnet, call.callee);
        let to = call.callee;
        self.enqueue(due, Delivery::Request { to, from: canister, callback, call });
    }

    /// Rounds from the end of a round in which a canister on `from` sent a message to the round
    /// `to` executes it.
    fn hop(&self, from: SubnetId, to: Principal) -> u64 {
        match self.nodes.get(&to) {
            Some(node) if node.subnet != from => self.rounds.across_subnets,
            // Another canister of the subnet, or itself: inducted between inner iterations.
            Some(_) => self.rounds.same_subnet,
            // Nobody: the system's reject takes `no_such_canister` rounds (added in `answer`).
            None => 0,
        }
    }

    /// Sends `response` from `from` to `origin` at the end of round `round`, with the `refund` of
    /// cycles the callee did not accept.
    fn answer(&mut self, round: u64, origin: Origin, from: Principal, response: Response, refund: u128) {
        match origin {
            Origin::Ingress => {
                let trace = self.trace_mut();
                trace.reply_round = round;
                trace.result = match response {
                    Response::Reply(bytes) => Ok(bytes),
                    Response::Reject(reject_code::CANISTER_REJECT, m) => Err(Reject::Rejected(m)),
                    Response::Reject(..) => Err(Reject::DidNotReply),
                };
            }
            Origin::Call { caller, callback } => {
                let due = match self.nodes.get(&from).map(|n| n.subnet) {
                    Some(subnet) => {
                        self.usage(from).bytes_sent += response.bytes();
                        round + self.hop(subnet, caller)
                    }
                    // The system's reject for a canister that does not exist (the loopback stream).
                    None => round + self.rounds.no_such_canister,
                };
                self.enqueue(due, Delivery::Response { to: caller, callback, response, refund });
            }
        }
    }

    /// A response reaches its caller: the refund, then the reply or reject callback in the call's
    /// context (its cleanup if the callback traps).
    fn response(&mut self, round: u64, to: Principal, callback: u64, response: Response, refund: u128) {
        let Some(node) = self.nodes.get_mut(&to) else { return };
        let Some(Pending { context, call }) = node.callbacks.remove(&callback) else { return };
        node.canister.set_cycles(node.canister.cycles() + refund);
        let ctx = node.contexts.get_mut(&context).expect("a context with a call outstanding");
        ctx.outstanding -= 1;
        let (kind, (fun, env), arg, code, text) = match &response {
            Response::Reply(bytes) => (Kind::ReplyCallback, call.reply, bytes.clone(), 0, String::new()),
            Response::Reject(code, text) => (Kind::RejectCallback, call.reject, Vec::new(), *code, text.clone()),
        };
        let mut m = Message::new(kind, arg, ctx.msg.caller, node.canister.clock());
        (m.reply, m.replied, m.rejected, m.max_reply) =
            (ctx.msg.reply.clone(), ctx.msg.replied, ctx.msg.rejected.clone(), ctx.msg.max_reply);
        (m.reject_code, m.reject_message, m.cycles_refunded) = (code, text, refund);
        // A callback may accept what is left of the cycles its context received.
        let (available, origin) = (ctx.msg.cycles_available, ctx.origin);
        m.cycles_available = available;
        let what = if kind == Kind::ReplyCallback { "reply callback" } else { "reject callback" };
        let e = self.run(to, m, Entry::Callback(fun, env));
        let end = self.executed(to, round, what, &e, true);
        let mut instructions = e.used;
        let calls = match &e.trap {
            None => {
                let ctx = self.nodes.get_mut(&to).expect("installed").contexts.get_mut(&context).expect("open");
                (ctx.msg.reply, ctx.msg.replied, ctx.msg.rejected) = (e.msg.reply, e.msg.replied, e.msg.rejected);
                ctx.msg.cycles_available = e.msg.cycles_available;
                self.accepted(to, origin, available - e.msg.cycles_available);
                e.calls
            }
            Some(_) => {
                if let Some((fun, env)) = call.cleanup {
                    let node = self.nodes.get_mut(&to).expect("installed");
                    let caller = node.contexts[&context].msg.caller;
                    let m = Message::new(Kind::Cleanup, Vec::new(), caller, node.canister.clock());
                    let c = self.run(to, m, Entry::Callback(fun, env));
                    self.executed(to, end, "cleanup", &c, false);
                    instructions += c.used;
                }
                Vec::new()
            }
        };
        // The response's execution was prepaid with the call: what it used is booked as
        // executions (and was charged as such), the prepayment covers it as far as it goes, what
        // the response did not use comes back now, and the call is charged the rest.
        let nodes = self.subnets[self.nodes[&to].subnet as usize];
        let fees = CallFees { nodes };
        let transmission = fees.transmission(response.bytes());
        let covered = (prices::update_cycles_on(instructions, nodes) as u128)
            .min(fees.prepaid_response().saturating_sub(transmission));
        let returned = fees.refund(response.bytes(), instructions);
        let node = self.nodes.get_mut(&to).expect("installed");
        node.canister.set_cycles(node.canister.cycles() + returned + covered);
        self.usage(to).call_cycles -= returned + covered;
        self.after(to, end, context, calls, e.trap);
    }
}

#[cfg(test)]
mod tests {
    //! Hand-written canisters, with what each message must cost derived by hand from the
    //! replica's fees (`crate::replica::fee`) and prices (`stablebench_grid::ic::prices`).

    use super::*;
    use crate::instrument::Metering;

    const IMPORTS: &str = r#"
      (import "ic0" "msg_arg_data_size" (func $arg_size (result i32)))
      (import "ic0" "msg_arg_data_copy" (func $arg_copy (param i32 i32 i32)))
      (import "ic0" "msg_reply_data_append" (func $append (param i32 i32)))
      (import "ic0" "msg_reply" (func $reply))
      (import "ic0" "msg_reject" (func $reject (param i32 i32)))
      (import "ic0" "msg_reject_code" (func $reject_code (result i32)))
      (import "ic0" "msg_cycles_accept" (func $accept (param i64) (result i64)))
      (import "ic0" "msg_cycles_refunded" (func $refunded (result i64)))
      (import "ic0" "call_new" (func $call_new (param i32 i32 i32 i32 i32 i32 i32 i32)))
      (import "ic0" "call_data_append" (func $call_append (param i32 i32)))
      (import "ic0" "call_cycles_add" (func $cycles_add (param i64)))
      (import "ic0" "call_on_cleanup" (func $on_cleanup (param i32 i32)))
      (import "ic0" "call_perform" (func $call_perform (result i32)))
    "#;

    /// The caller. `ask*` take `[n][callee: n bytes][method]`, write 1 at address 0 (a change
    /// made before the call), and call `method` on the callee with "ping" (`ask_twice`: two such
    /// calls); the reply callback
    /// replies with the response (or, env 5, with the cycles refunded; env 9, traps); the reject
    /// callback replies with the reject code; the cleanup writes 7 at address 8.
    const CALLER: &str = r#"
      (table funcref (elem $on_reply $on_reject $cleanup))
      (data (i32.const 300) "ping")
      (func $on_reply (param $env i32) (local $n i32)
        local.get $env i32.const 9 i32.eq if unreachable end
        local.get $env i32.const 5 i32.eq if
          i32.const 500 call $refunded i64.store
          i32.const 500 i32.const 8 call $append call $reply return
        end
        call $arg_size local.set $n
        i32.const 400 i32.const 0 local.get $n call $arg_copy
        i32.const 400 local.get $n call $append call $reply)
      (func $on_reject (param $env i32)
        i32.const 500 call $reject_code i32.store
        i32.const 500 i32.const 4 call $append call $reply)
      (func $cleanup (param $env i32) i32.const 8 i32.const 7 i32.store)
      (func $new (param $env i32) (local $len i32) (local $n i32)
        i32.const 0 i32.const 1 i32.store
        call $arg_size local.set $len
        i32.const 100 i32.const 0 local.get $len call $arg_copy
        i32.const 100 i32.load8_u local.set $n
        i32.const 101 local.get $n
        i32.const 101 local.get $n i32.add local.get $len i32.const 1 i32.sub local.get $n i32.sub
        i32.const 0 local.get $env i32.const 1 i32.const 0 call $call_new
        i32.const 300 i32.const 4 call $call_append)
      (func (export "canister_update ask") i32.const 0 call $new call $call_perform drop)
      (func (export "canister_update ask_cycles")
        i32.const 5 call $new i64.const 1000000 call $cycles_add call $call_perform drop)
      (func (export "canister_update ask_trapping_callback")
        i32.const 9 call $new i32.const 2 i32.const 0 call $on_cleanup call $call_perform drop)
      (func (export "canister_update ask_twice")
        i32.const 0 call $new call $call_perform drop i32.const 0 call $new call $call_perform drop)
      (func (export "canister_query marks") i32.const 0 i32.const 12 call $append call $reply)
    "#;

    /// The callee: `pong` replies (nothing); `boom` writes 99 at address 0 and traps; `nope`
    /// rejects; `silent` returns without replying; `take` accepts 400,000 cycles and replies;
    /// `spin` runs a loop of 100,000 iterations and replies; `marks` reads address 0.
    const CALLEE: &str = r#"
      (data (i32.const 200) "no")
      (func (export "canister_update pong") call $reply)
      (func (export "canister_update boom") i32.const 0 i32.const 99 i32.store unreachable)
      (func (export "canister_update nope") i32.const 200 i32.const 2 call $reject)
      (func (export "canister_update silent"))
      (func (export "canister_update take") i64.const 400000 call $accept drop call $reply)
      (func (export "canister_update spin") (local $i i32)
        loop local.get $i i32.const 1 i32.add local.tee $i i32.const 100000 i32.lt_u br_if 0 end
        call $reply)
      (func (export "canister_query marks") i32.const 0 i32.const 4 call $append call $reply)
    "#;

    fn code(body: &str) -> Arc<Code> {
        let wasm = wat::parse_str(format!("(module {IMPORTS} (memory 1) {body})")).expect("valid wat");
        Code::new(&wasm, Metering::On).expect("instruments and compiles")
    }

    fn id(n: u8) -> Principal {
        Principal::from_slice(&[0, 0, 0, 0, 0, 0, 0, n, 1, 1])
    }

    const A: u8 = 1;
    const B: u8 = 2;

    /// The caller on subnet 0 and the callee on `callee_subnet`.
    fn network(subnets: u32, callee_subnet: SubnetId, rounds: Rounds) -> Network {
        let mut net = Network::with_rounds(vec![prices::SUBNET_NODES; subnets as usize], rounds);
        let opts = |n| Options { canister_id: id(n), ..Options::default() };
        net.install(code(CALLER), &[], opts(A), 0).unwrap();
        net.install(code(CALLEE), &[], opts(B), callee_subnet).unwrap();
        net
    }

    fn ask(callee: Principal, method: &str) -> Vec<u8> {
        let mut arg = vec![callee.as_slice().len() as u8];
        arg.extend_from_slice(callee.as_slice());
        arg.extend_from_slice(method.as_bytes());
        arg
    }

    fn marks(net: &mut Network, n: u8) -> Vec<u8> {
        net.canister(id(n)).unwrap().query("marks", &[], Principal::anonymous()).result.unwrap()
    }

    fn user() -> Principal {
        Principal::anonymous()
    }

    #[test]
    fn a_call_runs_as_the_callees_own_message_and_its_reply_reaches_the_callback() {
        let mut net = network(1, 0, Rounds::REPLICA);
        let before = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        let arg = ask(id(B), "pong");
        let t = net.update(id(A), "ask", &arg, user());
        assert_eq!(t.result, Ok(Vec::new()), "the callback replies with pong's empty reply");
        let whats: Vec<(Principal, &str)> = t.log.iter().map(|l| (l.canister, l.what.as_str())).collect();
        assert_eq!(whats, [(id(A), "ask"), (id(B), "pong"), (id(A), "reply callback")]);
        // pong: the export's entry (1), the call of msg_reply (5) and its fee (500); the same
        // as a direct ingress message to it.
        let (a, b) = (t.usage(id(A)), t.usage(id(B)));
        assert_eq!(b.instructions, 1 + 5 + 500);
        let mut alone = Canister::install(code(CALLEE), &[], Options::default()).unwrap().0;
        assert_eq!(alone.update("pong", &[], user()).instructions, b.instructions);
        // On one subnet the call and its response complete in the round of the ingress message.
        assert_eq!((t.reply_round, t.last_round), (1, 1));
        // Cycles on a 13-node subnet: the callee pays its execution; the caller its ingress
        // message (method and argument bytes), its two executions, the call (fee, "pong" and
        // "ping") and the response's bytes (none).
        assert_eq!(b.cycles(), 5_000_000 + 506);
        assert_eq!(a.ingress_cycles, 1_200_000 + 2_000 * (3 + arg.len() as u128));
        assert_eq!(a.execution_cycles, 2 * 5_000_000 + a.instructions as u128);
        assert_eq!(a.call_cycles, 260_000 + 1_000 * 8);
        assert_eq!((a.calls, a.bytes_sent, b.bytes_sent), (1, 8, 0));
        let after = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        assert_eq!((before.0 - after.0, before.1 - after.1), (a.cycles(), b.cycles()));
    }

    #[test]
    fn a_callee_that_traps_is_undone_and_the_caller_keeps_what_it_did_before_the_call() {
        let mut net = network(1, 0, Rounds::REPLICA);
        let t = net.update(id(A), "ask", &ask(id(B), "boom"), user());
        assert_eq!(t.result, Ok(5i32.to_le_bytes().to_vec()), "CANISTER_ERROR");
        assert!(t.log[1].trap.as_deref().is_some_and(|m| m.contains("unreachable")), "{:?}", t.log);
        assert_eq!(marks(&mut net, B), [0; 4], "the callee's write was undone");
        assert_eq!(marks(&mut net, A)[..4], 1i32.to_le_bytes(), "the caller's write before the call stays");
    }

    #[test]
    fn rejects_carry_the_replicas_codes() {
        let mut net = network(1, 0, Rounds::REPLICA);
        for (callee, method, code) in [
            (id(B), "nope", reject_code::CANISTER_REJECT),
            (id(B), "silent", reject_code::CANISTER_ERROR),
            (id(B), "missing", reject_code::CANISTER_ERROR),
            (id(9), "pong", reject_code::DESTINATION_INVALID),
        ] {
            let t = net.update(id(A), "ask", &ask(callee, method), user());
            assert_eq!(t.result, Ok(code.to_le_bytes().to_vec()), "{method}");
        }
        // A canister removed from the network is no longer there.
        net.remove(id(B));
        let t = net.update(id(A), "ask", &ask(id(B), "pong"), user());
        assert_eq!(t.result, Ok(reject_code::DESTINATION_INVALID.to_le_bytes().to_vec()));
        assert_eq!(t.log.len(), 2, "the ask and its reject callback: {:?}", t.log);
    }

    #[test]
    fn a_callback_that_traps_is_undone_and_its_cleanup_runs() {
        let mut net = network(1, 0, Rounds::REPLICA);
        let t = net.update(id(A), "ask_trapping_callback", &ask(id(B), "pong"), user());
        assert!(
            matches!(&t.result, Err(Reject::Trapped(Trap::Canister(m))) if m.contains("unreachable")),
            "{:?}",
            t.result
        );
        let whats: Vec<&str> = t.log.iter().map(|l| l.what.as_str()).collect();
        assert_eq!(whats, ["ask_trapping_callback", "pong", "reply callback", "cleanup"]);
        let m = marks(&mut net, A);
        assert_eq!((&m[..4], &m[8..12]), (&1i32.to_le_bytes()[..], &7i32.to_le_bytes()[..]));
    }

    #[test]
    fn attached_cycles_move_as_far_as_the_callee_accepts_them_and_the_rest_is_refunded() {
        let mut net = network(1, 0, Rounds::REPLICA);
        let before = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        let t = net.update(id(A), "ask_cycles", &ask(id(B), "take"), user());
        assert_eq!(t.result, Ok(600_000u64.to_le_bytes().to_vec()), "msg_cycles_refunded: 1 M less 400 k");
        let (a, b) = (t.usage(id(A)), t.usage(id(B)));
        assert_eq!((a.cycles_transferred, b.cycles_transferred), (-400_000, 400_000));
        let after = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        assert_eq!(before.0 - after.0, a.cycles() + 400_000);
        assert_eq!(after.1 + b.cycles(), before.1 + 400_000);
        // A trapping callee accepts nothing: everything comes back.
        let before = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        let t = net.update(id(A), "ask_cycles", &ask(id(B), "boom"), user());
        assert_eq!(t.result, Ok(5i32.to_le_bytes().to_vec()));
        assert_eq!((t.usage(id(A)).cycles_transferred, t.usage(id(B)).cycles_transferred), (0, 0));
        let after = (net.canister(id(A)).unwrap().cycles(), net.canister(id(B)).unwrap().cycles());
        assert_eq!((before.0 - after.0, before.1 - after.1), (t.usage(id(A)).cycles(), t.usage(id(B)).cycles()));
    }

    #[test]
    fn each_message_has_its_own_instruction_limit() {
        // The callee's loop: per iteration get, const, add, tee, const, lt (1 each) and br_if (2):
        // 8, so 800,000 for the loop, and a few hundred more around it. The limit lets each
        // message run, and not the two together.
        let limits = crate::canister::Limits { update: 805_000, ..crate::canister::Limits::PRODUCTION };
        let mut net = Network::new(1);
        let opts = |n| Options { canister_id: id(n), limits, ..Options::default() };
        net.install(code(CALLER), &[], opts(A), 0).unwrap();
        net.install(code(CALLEE), &[], opts(B), 0).unwrap();
        let t = net.update(id(A), "ask", &ask(id(B), "spin"), user());
        assert_eq!(t.result, Ok(Vec::new()));
        let spin = t.usage(id(B)).instructions;
        assert!((800_000..805_000).contains(&spin), "{spin}");
        assert!(t.instructions() > 805_000, "the whole exceeds one message's limit: {}", t.instructions());
        // The callee's method costs what it costs as an ingress message of its own.
        let mut alone = Canister::install(code(CALLEE), &[], opts(B)).unwrap().0;
        assert_eq!(alone.update("spin", &[], user()).instructions, spin);
    }

    #[test]
    fn rounds_across_subnets_and_long_executions() {
        // Request and response each cross: executed two rounds after the round that sent them.
        let mut net = network(2, 1, Rounds::REPLICA);
        let t = net.update(id(A), "ask", &ask(id(B), "pong"), user());
        assert_eq!(t.result, Ok(Vec::new()));
        let rounds: Vec<u64> = t.log.iter().map(|l| l.round).collect();
        assert_eq!(rounds, [1, 3, 5]);
        assert_eq!(t.reply_round, 5);
        // A call to itself is inducted like one to another canister of its subnet: one round.
        let t = net.update(id(A), "ask", &ask(id(A), "marks"), user());
        assert_eq!(t.result.map(|r| r.len()), Ok(12), "the query's 12 bytes, run as the callee");
        let rounds: Vec<u64> = t.log.iter().map(|l| l.round).collect();
        assert_eq!(rounds, [1, 1, 1]);
        // A call to a canister that does not exist: the system's reject comes a round later.
        let t = net.update(id(A), "ask", &ask(id(9), "pong"), user());
        let rounds: Vec<u64> = t.log.iter().map(|l| l.round).collect();
        assert_eq!(rounds, [1, 2]);
        // With slices of 300 k instructions, the callee's 800 k-instruction loop takes three
        // rounds (3, 4, 5) and its response is executed two rounds after the last.
        let rounds = Rounds { slice_instructions: 300_000, ..Rounds::REPLICA };
        let mut net = network(2, 1, rounds);
        let t = net.update(id(A), "ask", &ask(id(B), "spin"), user());
        let rounds: Vec<u64> = t.log.iter().map(|l| l.round).collect();
        assert_eq!(rounds, [1, 3, 7]);
    }

    #[test]
    fn a_canister_that_used_its_rounds_budget_runs_the_next_message_in_the_next_round() {
        // The callee's loop (about 800 k instructions) uses up a 500 k budget: the second call's
        // loop waits for round 2, and its callback, which finds the call answered, traps.
        let rounds = Rounds { round_instructions: 500_000, ..Rounds::REPLICA };
        let mut net = network(1, 0, rounds);
        let t = net.update(id(A), "ask_twice", &ask(id(B), "spin"), user());
        assert_eq!(t.result, Ok(Vec::new()));
        let log: Vec<(&str, u64, bool)> = t.log.iter().map(|l| (l.what.as_str(), l.round, l.trap.is_some())).collect();
        assert_eq!(
            log,
            [
                ("ask_twice", 1, false),
                ("spin", 1, false),
                ("reply callback", 1, false),
                ("spin", 2, false),
                ("reply callback", 2, true)
            ]
        );
        assert_eq!((t.reply_round, t.last_round), (1, 2));
    }

    #[test]
    fn the_same_messages_run_the_same_way_every_time() {
        let run = || {
            let mut net = network(2, 1, Rounds::REPLICA);
            let mut logs = Vec::new();
            for method in ["pong", "boom", "take", "spin"] {
                logs.push(net.update(id(A), "ask_cycles", &ask(id(B), method), user()).log);
            }
            (logs, net.canister(id(A)).unwrap().cycles())
        };
        assert_eq!(run(), run());
    }
}
