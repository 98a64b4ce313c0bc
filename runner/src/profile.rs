//! Where the instructions go: an exact, per-function profile of a message's wasm instructions.
//!
//! A module instrumented with [`Metering::Profiled`](crate::instrument::Metering::Profiled) calls
//! two host functions, unmetered: `profile_enter(func, counter)` at every function entry (before
//! the entry block's charge) and `profile_exit(func, counter)` before every exit. The
//! [`Profiler`] keeps the call stack as a node of a call tree and, at every hook, adds the
//! instructions executed since the previous hook (the counter's decrease: wasm charges and host
//! fees alike) to the current node, i.e. exclusively to the function on top of the stack. So a
//! system API's fee lands on the wasm function that called it, and the sum over the tree is the
//! message's instruction count, exactly: nothing runs between the last hook and the end of a call
//! that [`end_call`] does not add.
//!
//! A trap leaves the stack unbalanced: [`end_call`] adds what ran since the last hook to the
//! frame that trapped and closes every open frame (counted in [`Profile::unbalanced`]). A
//! profile belongs to one message: it is reset when a message begins and taken with
//! `Canister::take_profile`.
//!
//! Each `ic0.performance_counter` call is a mark ([`mark`]): the tree is also kept as segments
//! between marks, so that a canbench measurement (the instructions between two
//! `performance_counter(0)` calls, which is what `bench_fn` reports) can be profiled on its own
//! ([`Profile::step`]).
//!
//! **Pages.** With [`Host::profile_pages`] on (and a module that tracks the Wasm pages it
//! touches), every hook also collects the page marks (`host::page_counts`) and adds the pages
//! first touched since the previous hook, heap and stable, accessed and written, to the function
//! on top of the stack: where the pages the IC's memory tracker charges come from
//! ([`Profile::pages`]). A page counts where it was first touched since the tracker last
//! started (a message, or a measured step), as the tracker charges it. Pages are kept per call
//! path, so that the allocators' pages can be told apart by the call that asked for the memory
//! ([`Profile::pages_by_site`], [`allocation_sites`]).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use stablebench_grid::grouped;
use wasmparser::{KnownCustom, Name, Parser, Payload};
use wasmtime::{Caller, Linker};

use crate::host::{executed, Host, PageCounts};
use crate::instrument::{BULK_FRAME, PROFILE_ENTER, PROFILE_EXIT, PROFILE_MODULE};

/// Adds the profiler's hooks to `linker` (for modules instrumented with `Metering::Profiled`).
pub fn add_to_linker(linker: &mut Linker<Host>) -> wasmtime::Result<()> {
    linker.func_wrap(PROFILE_MODULE, PROFILE_ENTER, |mut c: Caller<'_, Host>, func: i32, counter: i64| {
        attribute_pages(&mut c, None);
        let h = c.data_mut();
        let now = executed(h.limit, counter);
        h.profile.get_or_insert_with(Default::default).enter(func as u32, now);
    })?;
    linker.func_wrap(PROFILE_MODULE, PROFILE_EXIT, |mut c: Caller<'_, Host>, func: i32, counter: i64| {
        attribute_pages(&mut c, Some(func as u32));
        let h = c.data_mut();
        let now = executed(h.limit, counter);
        h.profile.get_or_insert_with(Default::default).exit(func as u32, now);
    })?;
    Ok(())
}

/// With [`Host::profile_pages`]: adds the pages first touched since the previous hook to the
/// frame of `func` (at an exit) or to the frame on top of the stack (at an entry, `None`). Collecting may
/// charge the ic model's page fees here instead of at the next counter read: the same total.
fn attribute_pages(c: &mut Caller<'_, Host>, func: Option<u32>) {
    if !c.data().profile_pages {
        return;
    }
    let now = crate::host::page_counts(c);
    if let Some(p) = c.data_mut().profile.as_mut() {
        let node = func.map_or(p.cur, |f| p.frame_of(f));
        p.touch_pages(node, now);
    }
}

/// Called by the canister when a call of a message ends (returned or trapped), with the
/// instructions the call executed: adds what ran since the last hook and closes open frames.
pub fn end_call(host: &mut Host, used: u64) {
    if let Some(p) = host.profile.as_mut() {
        p.end_call(used);
    }
}

/// Called by `ic0.performance_counter` with the counter's value after its fee: a mark.
pub fn mark(host: &mut Host, counter: i64) {
    let now = executed(host.limit, counter);
    if let Some(p) = host.profile.as_mut() {
        p.mark(now);
    }
}

/// The pseudo-function of the call tree's root (instructions outside any wasm function; none in
/// practice).
const ROOT: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Node {
    func: u32,
    parent: u32,
    /// Instructions executed with this node on top of the stack.
    count: u64,
    /// `count` at the last mark.
    at_mark: u64,
    /// In `touched` (counted since the last mark).
    touched: bool,
    /// The last child entered: (function, node), a shortcut past the hash map.
    memo: (u32, u32),
}

impl Node {
    fn new(func: u32, parent: u32) -> Node {
        Node { func, parent, count: 0, at_mark: 0, touched: false, memo: (ROOT, 0) }
    }
}

/// A fast hasher for the (parent node, function) keys of the call tree.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The running profile of one message (kept in the [`Host`]).
#[derive(Clone)]
pub struct Profiler {
    /// The call tree; node 0 is the root.
    nodes: Vec<Node>,
    children: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    /// The node of the current call stack.
    cur: u32,
    /// Instructions executed in this call at the last hook.
    last: u64,
    /// Nodes counted since the last mark.
    touched: Vec<u32>,
    /// Per mark: the instructions executed at the mark and what each node gained since the
    /// previous mark.
    marks: Vec<(u64, Vec<(u32, u64)>)>,
    unbalanced: u64,
    mismatched: u64,
    /// Per node (call path): the Wasm pages it touched first (with `Host::profile_pages`).
    pages: HashMap<u32, PageCounts>,
    /// The page counts at the last hook.
    pages_seen: PageCounts,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler {
            nodes: vec![Node::new(ROOT, 0)],
            children: HashMap::default(),
            cur: 0,
            last: 0,
            touched: Vec::new(),
            marks: Vec::new(),
            unbalanced: 0,
            mismatched: 0,
            pages: HashMap::new(),
            pages_seen: PageCounts::default(),
        }
    }
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").field("nodes", &self.nodes.len()).field("marks", &self.marks.len()).finish()
    }
}

impl Profiler {
    /// Adds the instructions executed since the last hook to the current node.
    fn charge(&mut self, now: u64) {
        if now <= self.last {
            return;
        }
        let node = &mut self.nodes[self.cur as usize];
        node.count += now - self.last;
        self.last = now;
        if !node.touched {
            node.touched = true;
            self.touched.push(self.cur);
        }
    }

    fn enter(&mut self, func: u32, now: u64) {
        self.charge(now);
        let cur = self.cur;
        let (memo_func, memo_node) = self.nodes[cur as usize].memo;
        let child = if memo_func == func {
            memo_node
        } else {
            let key = ((cur as u64) << 32) | func as u64;
            let nodes = &mut self.nodes;
            let child = *self.children.entry(key).or_insert_with(|| {
                nodes.push(Node::new(func, cur));
                (nodes.len() - 1) as u32
            });
            nodes[cur as usize].memo = (func, child);
            child
        };
        self.cur = child;
    }

    fn exit(&mut self, func: u32, now: u64) {
        self.charge(now);
        let node = &self.nodes[self.cur as usize];
        if node.func == func {
            self.cur = node.parent;
            return;
        }
        // Not the function on top (the stack was unwound without its exits): leave the frames
        // above the innermost one of `func`, if any.
        self.mismatched += 1;
        let mut n = self.cur;
        while n != 0 && self.nodes[n as usize].func != func {
            n = self.nodes[n as usize].parent;
        }
        if n != 0 {
            self.cur = self.nodes[n as usize].parent;
        }
    }

    /// The node of the frame of `func` that an exit of `func` leaves: the top of the stack, or
    /// the innermost frame of `func` below it (as [`Profiler::exit`] unwinds), or the top when
    /// `func` is not on the stack.
    fn frame_of(&self, func: u32) -> u32 {
        let mut n = self.cur;
        while n != 0 && self.nodes[n as usize].func != func {
            n = self.nodes[n as usize].parent;
        }
        if n == 0 {
            self.cur
        } else {
            n
        }
    }

    /// Adds the pages touched since the last hook (`now`: the counts since the tracker last
    /// started) to `node`. Counts below the last ones mean the tracker started afresh.
    fn touch_pages(&mut self, node: u32, now: PageCounts) {
        let seen = self.pages_seen;
        let fresh = now.heap_accessed < seen.heap_accessed
            || now.heap_written < seen.heap_written
            || now.stable_accessed < seen.stable_accessed
            || now.stable_written < seen.stable_written;
        let new = if fresh { now } else { now.minus(&seen) };
        self.pages_seen = now;
        if new != PageCounts::default() {
            let e = self.pages.entry(node).or_default();
            *e = e.plus(&new);
        }
    }

    fn mark(&mut self, now: u64) {
        self.charge(now);
        let segment = self.segment();
        self.marks.push((now, segment));
    }

    /// What each node gained since the last mark.
    fn segment(&mut self) -> Vec<(u32, u64)> {
        let mut out = Vec::with_capacity(self.touched.len());
        for n in self.touched.drain(..) {
            let node = &mut self.nodes[n as usize];
            node.touched = false;
            if node.count > node.at_mark {
                out.push((n, node.count - node.at_mark));
            }
            node.at_mark = node.count;
        }
        out
    }

    fn end_call(&mut self, used: u64) {
        self.charge(used);
        while self.cur != 0 {
            self.unbalanced += 1;
            self.cur = self.nodes[self.cur as usize].parent;
        }
        self.last = 0;
        // The next execution's tracker starts afresh.
        self.pages_seen = PageCounts::default();
    }

    /// The finished profile.
    pub fn finish(mut self) -> Profile {
        let tail = self.segment();
        let (marks, mut segments): (Vec<u64>, Vec<_>) = self.marks.into_iter().unzip();
        segments.push(tail);
        Profile {
            func: self.nodes.iter().map(|n| n.func).collect(),
            parent: self.nodes.iter().map(|n| n.parent).collect(),
            count: self.nodes.iter().map(|n| n.count).collect(),
            marks,
            segments,
            unbalanced: self.unbalanced,
            mismatched: self.mismatched,
            pages: self.pages,
        }
    }
}

/// One message's profile: its call tree, with the instructions each call path executed
/// exclusively, and the marks (`performance_counter` calls) that cut it into segments.
#[derive(Clone, Debug)]
pub struct Profile {
    func: Vec<u32>,
    parent: Vec<u32>,
    count: Vec<u64>,
    marks: Vec<u64>,
    /// `segments[k]`: what each node gained between mark k - 1 (or the start) and mark k; the
    /// last one after the last mark.
    segments: Vec<Vec<(u32, u64)>>,
    unbalanced: u64,
    mismatched: u64,
    /// Per node: the pages it touched first.
    pages: HashMap<u32, PageCounts>,
}

/// Where pages first touched inside a group of functions (say, the allocators) came from: the
/// call that entered the group (`entry`, the outermost frame of the group on the path) and the
/// nearest frame below it that is neither in the group nor passed through (`caller`: the
/// allocation site, past the container code that only forwards a request). [`ROOT`]'s index
/// (`u32::MAX`) where there is none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Site {
    /// The function that asked.
    pub caller: u32,
    /// The group's function it called.
    pub entry: u32,
}

/// Sorts per-key page counts most pages (accessed, then written) first, then by key.
fn by_most_pages<K: Ord + Copy>(map: HashMap<K, PageCounts>) -> Vec<(K, PageCounts)> {
    let mut v: Vec<(K, PageCounts)> = map.into_iter().collect();
    v.sort_by_key(|(k, p)| (std::cmp::Reverse((p.accessed(), p.written())), *k));
    v
}

impl Profile {
    /// Per function, the Wasm pages it touched first (with `Host::profile_pages`; empty
    /// otherwise), most pages (accessed, then written) first.
    pub fn pages(&self) -> Vec<(u32, PageCounts)> {
        let mut by_func: HashMap<u32, PageCounts> = HashMap::new();
        for (&n, p) in &self.pages {
            let e = by_func.entry(self.func[n as usize]).or_default();
            *e = e.plus(p);
        }
        by_most_pages(by_func)
    }

    /// The pages first touched by functions for which `inner` holds (with
    /// `Host::profile_pages`), by [`Site`]: each page goes to the call path that touched it, and
    /// the path to its outermost run of `inner` functions (the entry) and the nearest frame
    /// below that for which neither `inner` nor `through` holds (the caller). Most pages first.
    /// The pages of every other function are not counted.
    pub fn pages_by_site(&self, inner: impl Fn(u32) -> bool, through: impl Fn(u32) -> bool) -> Vec<(Site, PageCounts)> {
        let mut by_site: HashMap<Site, PageCounts> = HashMap::new();
        for (&n, p) in &self.pages {
            let mut n = n as usize;
            if n == 0 || !inner(self.func[n]) {
                continue;
            }
            // Up to the outermost frame of the run of inner functions this one belongs to.
            while self.parent[n] != 0 && inner(self.func[self.parent[n] as usize]) {
                n = self.parent[n] as usize;
            }
            let entry = self.func[n];
            let mut c = self.parent[n] as usize;
            while c != 0 && (inner(self.func[c]) || through(self.func[c])) {
                c = self.parent[c] as usize;
            }
            let e = by_site.entry(Site { caller: self.func[c], entry }).or_default();
            *e = e.plus(p);
        }
        by_most_pages(by_site)
    }

    /// The whole message's call tree.
    pub fn tree(&self) -> CallTree {
        CallTree { func: self.func.clone(), parent: self.parent.clone(), count: self.count.clone() }
    }

    /// The message's instructions: the sum of every node's exclusive count.
    pub fn total(&self) -> u64 {
        self.count.iter().sum()
    }

    /// Instructions executed (in the message's call) at each `performance_counter` call: what
    /// the call returned.
    pub fn marks(&self) -> &[u64] {
        &self.marks
    }

    /// Frames left open by traps (their exits never ran).
    pub fn unbalanced(&self) -> u64 {
        self.unbalanced
    }

    /// Exits that did not match the function on top of the stack (0 unless the module unwinds
    /// the stack without returning, e.g. with exceptions).
    pub fn mismatched(&self) -> u64 {
        self.mismatched
    }

    /// The call tree of the instructions executed between marks `from` and `to` (`from` < `to`):
    /// what `performance_counter` returned at `to` minus what it returned at `from`.
    pub fn between(&self, from: usize, to: usize) -> CallTree {
        let mut count = vec![0; self.count.len()];
        for seg in &self.segments[from + 1..=to] {
            for &(n, c) in seg {
                count[n as usize] += c;
            }
        }
        CallTree { func: self.func.clone(), parent: self.parent.clone(), count }
    }

    /// The first pair of marks (by the later mark, then the earlier) between which exactly
    /// `instructions` ran: a canbench measurement (`bench_fn` reads the counter before and after
    /// the step), if there is one.
    pub fn window(&self, instructions: u64) -> Option<(usize, usize)> {
        (1..self.marks.len()).find_map(|to| {
            (0..to)
                .find(|&from| self.marks[to].checked_sub(self.marks[from]) == Some(instructions))
                .map(|from| (from, to))
        })
    }

    /// The call tree of a measurement of `instructions` (see [`Profile::window`]).
    pub fn step(&self, instructions: u64) -> Option<CallTree> {
        self.window(instructions).map(|(from, to)| self.between(from, to))
    }
}

/// A call tree with exclusive instruction counts per call path.
#[derive(Clone, Debug)]
pub struct CallTree {
    func: Vec<u32>,
    parent: Vec<u32>,
    count: Vec<u64>,
}

/// One function's instructions in a call tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionCost {
    /// Index in the original module.
    pub func: u32,
    /// Executed with the function on top of the stack (its own code and the system API fees of
    /// its calls).
    pub exclusive: u64,
    /// Executed while the function was on the stack (recursion counted once).
    pub inclusive: u64,
}

impl CallTree {
    /// The sum of the exclusive counts.
    pub fn total(&self) -> u64 {
        self.count.iter().sum()
    }

    /// Exclusive and inclusive instructions per function, most exclusive first (then by index).
    pub fn functions(&self) -> Vec<FunctionCost> {
        let n = self.func.len();
        // Nodes are created after their parents: one backward pass sums the subtrees.
        let mut subtree = self.count.clone();
        for i in (1..n).rev() {
            subtree[self.parent[i] as usize] += subtree[i];
        }
        let mut by_func: HashMap<u32, (u64, u64)> = HashMap::new();
        for (i, &sub) in subtree.iter().enumerate().skip(1) {
            let f = self.func[i];
            let e = by_func.entry(f).or_default();
            e.0 += self.count[i];
            // Inclusive once per outermost frame of the function on a path.
            let mut a = self.parent[i] as usize;
            let mut outermost = true;
            while a != 0 {
                if self.func[a] == f {
                    outermost = false;
                    break;
                }
                a = self.parent[a] as usize;
            }
            if outermost {
                e.1 += sub;
            }
        }
        let mut out: Vec<FunctionCost> = by_func
            .into_iter()
            .filter(|(_, (e, i))| *e > 0 || *i > 0)
            .map(|(func, (exclusive, inclusive))| FunctionCost { func, exclusive, inclusive })
            .collect();
        out.sort_by(|a, b| b.exclusive.cmp(&a.exclusive).then(a.func.cmp(&b.func)));
        out
    }

    /// Every function's exclusive and inclusive instructions as tab-separated values: a header
    /// line (`function`, `exclusive`, `inclusive`), then one line per function in the order of
    /// [`CallTree::functions`], with `(outside wasm functions)` among them if any ran there. The exclusive
    /// column adds up to [`CallTree::total`]. Small enough to commit where the folded stacks are
    /// not (`docs/profiles/`, which `docs/breakdown.md`'s tables are generated from).
    pub fn functions_tsv(&self, names: &Names) -> String {
        let mut rows: Vec<(String, u64, u64)> =
            self.functions().into_iter().map(|f| (names.get(f.func), f.exclusive, f.inclusive)).collect();
        if self.outside() > 0 {
            rows.push((names.get(ROOT), self.outside(), self.outside()));
        }
        // Most exclusive first, the outside row where its count puts it (the sort is stable).
        rows.sort_by_key(|r| std::cmp::Reverse(r.1));
        let mut out = String::from("function\texclusive\tinclusive\n");
        for (name, exclusive, inclusive) in rows {
            let _ = writeln!(out, "{name}\t{exclusive}\t{inclusive}");
        }
        out
    }

    /// Instructions outside any wasm function (at the root of the tree).
    pub fn outside(&self) -> u64 {
        self.count[0]
    }

    /// Folded stacks, one line per call path that executed instructions: `a;b;c <count>`
    /// (what inferno and flamegraph.pl read), outermost frame first, in call-tree order.
    pub fn folded(&self, names: &Names) -> String {
        let n = self.func.len();
        let mut subtree = self.count.clone();
        for i in (1..n).rev() {
            subtree[self.parent[i] as usize] += subtree[i];
        }
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (i, &sub) in subtree.iter().enumerate().skip(1) {
            if sub > 0 {
                children[self.parent[i] as usize].push(i as u32);
            }
        }
        let mut out = String::new();
        if self.count[0] > 0 {
            let _ = writeln!(out, "(outside wasm functions) {}", self.count[0]);
        }
        // Depth-first, with the path as a string cut back on the way up.
        let mut path = String::new();
        let mut stack: Vec<(u32, usize)> = children[0].iter().rev().map(|&c| (c, 0)).collect();
        while let Some((node, cut)) = stack.pop() {
            path.truncate(cut);
            if !path.is_empty() {
                path.push(';');
            }
            path.push_str(&names.get(self.func[node as usize]));
            let c = self.count[node as usize];
            if c > 0 {
                let _ = writeln!(out, "{path} {c}");
            }
            let len = path.len();
            stack.extend(children[node as usize].iter().rev().map(|&c| (c, len)));
        }
        out
    }
}

/// The functions that touched the most Wasm pages first, as a Markdown table, then the
/// allocators' pages by allocation site ([`allocation_sites`]).
pub fn pages_report(profile: &Profile, names: &Names) -> String {
    let pages = profile.pages();
    let total = pages.iter().fold(PageCounts::default(), |t, (_, p)| t.plus(p));
    let mut out = format!(
        "\n## Wasm pages by the function that touched them first\n\nThe 64 KiB pages of heap and stable memory the \
         query touched (each counted again where a measured step starts the tracker afresh), by the function on top of \
         the stack at the first access or first write: {} accessed and {} written in all (heap {} / {}, stable {} / {}), \
         which mainnet's memory tracker charges {} instructions each (accessed) and {} more (written).\n\n\
         | function | bucket | heap accessed | heap written | stable accessed | stable written |\n|---|---|---:|---:|---:|---:|\n",
        total.accessed(),
        total.written(),
        total.heap_accessed,
        total.heap_written,
        total.stable_accessed,
        total.stable_written,
        stablebench_grid::grouped(stablebench_grid::ic::page_fees::ACCESS),
        stablebench_grid::grouped(stablebench_grid::ic::page_fees::WRITE),
    );
    for (func, p) in pages.iter().take(25) {
        let name = names.get(*func);
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} |",
            name.replace('|', "\\|"),
            bucket(&name).label(),
            p.heap_accessed,
            p.heap_written,
            p.stable_accessed,
            p.stable_written
        );
    }
    let sites = allocation_sites(profile, names);
    if !sites.is_empty() {
        let _ = write!(
            out,
            "\n## The allocators' pages by allocation site\n\nThe pages above that an allocator function touched \
             first (malloc and free walking and splitting chunks, writing their headers), by the call that asked: the \
             nearest frame below the allocator that is not Rust's container or iterator code forwarding the request \
             ({}), and the allocator function it called.\n\n\
             | allocation site | allocator entry | heap accessed | heap written |\n|---|---|---:|---:|\n",
            forwarding_paths()
        );
        for (site, p) in sites.iter().take(25) {
            let _ = writeln!(
                out,
                "| `{}` | `{}` | {} | {} |",
                names.get(site.caller).replace('|', "\\|"),
                names.get(site.entry).replace('|', "\\|"),
                p.heap_accessed,
                p.heap_written
            );
        }
    }
    out
}

/// The pages the allocators touched first (functions of [`Bucket::Allocator`]), by allocation
/// site ([`Profile::pages_by_site`]: the nearest caller that is neither an allocator function nor
/// [`forwards_allocation`]). Most pages first.
pub fn allocation_sites(profile: &Profile, names: &Names) -> Vec<(Site, PageCounts)> {
    // (an allocator function, forwards an allocation), per function of the profile.
    let mut kinds: HashMap<u32, (bool, bool)> = HashMap::new();
    for &f in &profile.func {
        kinds.entry(f).or_insert_with(|| {
            let n = names.get(f);
            (bucket(&n) == Bucket::Allocator, forwards_allocation(&n))
        });
    }
    profile.pages_by_site(|f| kinds[&f].0, |f| kinds[&f].1)
}

/// Rust's container and iterator code, which only forwards an allocation or a free to the
/// allocator (growing a `Vec` or a `String`, boxing, cloning, collecting an iterator, calling a
/// closure): passed over when naming an allocation site ([`forwards_allocation`]), so that the
/// site is the code that wanted the memory. Demangled path prefixes.
pub const FORWARDS_ALLOCATION: [&str; 9] = [
    "alloc::raw_vec::",
    "alloc::vec::",
    "alloc::string::",
    "alloc::boxed::",
    "alloc::borrow::",
    "alloc::fmt::",
    "alloc::slice::",
    "core::iter::",
    "core::ops::function::",
];

/// [`FORWARDS_ALLOCATION`] as Markdown: "`alloc::raw_vec`, `alloc::vec`, ...".
pub fn forwarding_paths() -> String {
    FORWARDS_ALLOCATION.map(|p| format!("`{}`", p.trim_end_matches("::"))).join(", ")
}

/// Whether `name` (demangled) is in [`FORWARDS_ALLOCATION`], either side of `<T as Trait>`.
pub fn forwards_allocation(name: &str) -> bool {
    let bare = name.trim_start_matches('<');
    FORWARDS_ALLOCATION.iter().any(|p| bare.starts_with(p) || name.contains(&format!(" as {p}")))
}

/// The name of [`BULK_FRAME`] in profiles.
pub const BULK_NAME: &str = "(memory.copy/fill: per byte)";

/// Function names from a module's name section, demangled; `func[N]` where there is none.
#[derive(Clone, Debug, Default)]
pub struct Names {
    names: HashMap<u32, String>,
}

impl Names {
    /// The function names of `wasm`'s name section (none if it has no name section).
    pub fn from_wasm(wasm: &[u8]) -> Result<Names> {
        let mut names = HashMap::new();
        for payload in Parser::new(0).parse_all(wasm) {
            let Payload::CustomSection(c) = payload.context("parsing the wasm")? else { continue };
            let KnownCustom::Name(reader) = c.as_known() else { continue };
            for sub in reader {
                // A malformed name section only costs the names.
                let Ok(Name::Function(map)) = sub else { continue };
                for naming in map.into_iter().flatten() {
                    names.insert(naming.index, clean(naming.name));
                }
            }
        }
        Ok(Names { names })
    }

    /// Whether the module had function names.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Function `func`'s name.
    pub fn get(&self, func: u32) -> String {
        match self.names.get(&func) {
            Some(n) => n.clone(),
            None if func == ROOT => "(outside wasm functions)".into(),
            None if func == BULK_FRAME => BULK_NAME.into(),
            None => format!("func[{func}]"),
        }
    }
}

/// A demangled name without its hash, fit for a folded-stack frame (no `;`, no line breaks).
fn clean(name: &str) -> String {
    let s = match rustc_demangle::try_demangle(name) {
        Ok(d) => format!("{d:#}"),
        Err(_) => name.to_string(),
    };
    s.replace(';', ",").replace(['\n', '\r'], " ")
}

/// Coarse groups of functions, for the breakdown (by name; see [`bucket`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Bucket {
    /// SQLite's C code: parser, VDBE, B-tree, pager, page cache, functions.
    Sqlite,
    /// What lies below SQLite: its VFS (os_unix.c), wasi-libc's file and clock calls,
    /// ic-wasi-polyfill, stable-fs, ic-stable-structures' memories, ic-cdk's system API
    /// wrappers, and the system API fees (charged to the function that calls `ic0.*`, e.g.
    /// `ic0.stable64_write` or `ic0.time`).
    Storage,
    /// malloc/free (wasi-libc's dlmalloc), SQLite's and Rust's wrappers around them.
    Allocator,
    /// memcpy and memset, which compilers inline as `memory.copy` and `memory.fill` (their
    /// per-byte charge, [`BULK_NAME`]; the fixed 100 stays with the caller), and the memmove and
    /// memcmp functions.
    MemOps,
    /// Everything else: rusqlite, the benchmark's Rust code, Candid, ic-cdk, Rust's std.
    Other,
}

impl Bucket {
    /// Every bucket, in report order.
    pub const ALL: [Bucket; 5] = [Bucket::Sqlite, Bucket::Storage, Bucket::Allocator, Bucket::MemOps, Bucket::Other];

    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Bucket::Sqlite => "SQLite (VDBE, B-tree, pager, ...)",
            Bucket::Storage => "storage and system path (VFS, WASI, polyfill, stable-fs, ic0)",
            Bucket::Allocator => "allocator",
            Bucket::MemOps => "memcpy/memset (memory.copy/fill per byte), memmove, memcmp",
            Bucket::Other => "other (rusqlite, benchmark, Candid, std)",
        }
    }

    /// A table column's title.
    pub fn column(self) -> &'static str {
        match self {
            Bucket::Sqlite => "SQLite",
            Bucket::Storage => "storage/system",
            Bucket::Allocator => "allocator",
            Bucket::MemOps => "memcpy/memset/memcmp",
            Bucket::Other => "other",
        }
    }
}

// The C functions of the module that are not SQLite's (wasi-libc, compiler builtins), by bucket;
// every other C function (no Rust path) is SQLite's. Lists, one name after the other, from the
// bench wasm's name section.
#[rustfmt::skip]
const MEM_OPS: &[&str] = &["memcpy", "memset", "memmove", "memcmp", "bcmp"];
#[rustfmt::skip]
const LIBC_ALLOC: &[&str] = &[
    "malloc", "free", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign", "dlmalloc", "dlfree",
    "dlrealloc", "dlcalloc", "internal_memalign", "dispose_chunk", "try_realloc_chunk", "tmalloc_large",
    "tmalloc_small", "prepend_alloc", "add_segment", "sys_alloc", "sys_trim", "release_unused_segments", "sbrk",
];
/// SQLite's allocation layer (mem1.c, malloc.c, status counters).
#[rustfmt::skip]
const SQLITE_ALLOC: &[&str] = &[
    "sqlite3MemMalloc", "sqlite3MemFree", "sqlite3MemRealloc", "sqlite3MemSize", "sqlite3MemRoundup",
    "sqlite3Malloc", "sqlite3MallocZero", "sqlite3MallocSize", "sqlite3Realloc", "sqlite3_free", "sqlite3_malloc",
    "sqlite3_malloc64", "sqlite3_realloc", "sqlite3_realloc64", "sqlite3DbFree", "sqlite3DbFreeNN",
    "sqlite3DbNNFreeNN", "sqlite3DbMallocRaw", "sqlite3DbMallocRawNN", "sqlite3DbMallocZero", "sqlite3DbMallocSize",
    "sqlite3DbRealloc", "sqlite3DbReallocOrFree", "dbMallocRawFinish", "dbReallocFinish", "mallocWithAlarm",
    "sqlite3StatusDown", "sqlite3StatusUp", "sqlite3StatusHighwater",
];
/// wasi-libc's file and clock calls (SQLite's unix VFS, os_unix.c, is matched by its `unix`
/// prefix).
#[rustfmt::skip]
const LIBC_STORAGE: &[&str] = &[
    "read", "write", "writev", "pread", "pwrite", "open", "openat", "close", "closedir", "fdopendir", "fdclosedir",
    "readdir", "dirfd", "fcntl", "fstat", "fstatat", "stat", "lstat", "fsync", "fdatasync", "ftruncate", "lseek",
    "__lseek", "unlink", "unlinkat", "mkdir", "rmdir", "readlink", "utimes", "access", "getcwd", "robust_open",
    "internal_register_preopened_fd_unlocked", "seekAndRead", "seekAndWrite", "seekAndWriteFd", "full_fsync",
    "robust_ftruncate", "closeUnixFile", "verifyDbFile", "fileHasMoved", "findInodeInfo", "posixUnlock",
    "gettimeofday", "time", "clock_gettime", "clock_nanosleep", "nanosleep",
];
/// wasi-libc's and the compiler's other functions, and the module's own glue.
#[rustfmt::skip]
const LIBC_OTHER: &[&str] = &[
    "strlen", "strcmp", "strncmp", "strchr", "strrchr", "strcpy", "strcspn", "strspn", "strdup", "strerror",
    "strerror_r", "memchr", "__memrchr", "__stpcpy", "__strchrnul", "qsort", "__qsort_r", "sift", "trinkle",
    "wrapper_cmp", "getenv", "sysconf", "log", "log2",
    "__multi3", "__ashlti3", "__muloti4", "__localtime_r", "__secs_to_tm", "__secs_to_zone", "__lctrans", "_Exit",
    "abort", "__wasm_call_dtors", "__wasm_call_ctors", "dummy", "init_seed", "raw_init", "raw_init_seed",
    "get_candid_pointer", "__prepare_tracing", "__dummy_wasi_calls",
];
/// Rust crates of the storage and system path (demangled path prefixes).
#[rustfmt::skip]
const RUST_STORAGE: &[&str] = &[
    "ic_wasi_polyfill::", "stable_fs::", "ic_stable_structures::", "ic_cdk::stable", "ic_cdk::api::", "ic0::",
];
/// Rust allocation paths.
#[rustfmt::skip]
const RUST_ALLOC: &[&str] = &[
    "alloc::alloc::", "std::alloc::", "dlmalloc::", "__rustc::__rdl_", "__rustc::__rust_alloc",
    "__rustc::__rust_dealloc", "__rustc::__rust_realloc", "__rustc::__rust_no_alloc_shim", "__rustc::__rg_",
    "__rust_alloc", "__rust_dealloc", "__rust_realloc", "__rdl_", "__rg_",
];

/// The bucket a function belongs to, by its (demangled) name: the lists above, SQLite for the
/// other C functions, Rust crates by path (`<T as Trait>` impls by either side).
pub fn bucket(name: &str) -> Bucket {
    let is = |list: &[&str]| list.contains(&name);
    // `<stable_fs::X as ic_stable_structures::Storable>::from_bytes`: both sides count.
    let bare = name.trim_start_matches('<');
    let in_paths = |paths: &[&str]| paths.iter().any(|p| bare.starts_with(p) || name.contains(&format!(" as {p}")));
    if name == BULK_NAME {
        return Bucket::MemOps;
    }
    if name.contains(' ') && !name.contains(" as ") || name.ends_with(".command_export") {
        // Exports (`canister_query m`) and their wasm-ld wrappers: entry points.
        return Bucket::Other;
    }
    if is(MEM_OPS) || bare.starts_with("compiler_builtins::mem::") {
        Bucket::MemOps
    } else if is(LIBC_ALLOC) || is(SQLITE_ALLOC) || in_paths(RUST_ALLOC) {
        Bucket::Allocator
    } else if is(LIBC_STORAGE)
        || name.starts_with("unix") && name != "unixepochFunc"
        || name.starts_with("__ic_custom_")
        || name.starts_with("__wasi_")
        || name.starts_with("__wasilibc_")
        || in_paths(RUST_STORAGE)
    {
        Bucket::Storage
    } else if is(LIBC_OTHER) || name.contains("::") || name.starts_with('<') || name.starts_with("func[") {
        Bucket::Other
    } else {
        Bucket::Sqlite
    }
}

/// A flamegraph of folded stacks, as SVG.
pub fn flamegraph(folded: &str, title: &str, subtitle: &str) -> Result<Vec<u8>> {
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.subtitle = Some(subtitle.to_string());
    opts.count_name = "instructions".into();
    opts.hash = true;
    let mut svg = Vec::new();
    if folded.trim().is_empty() {
        bail!("nothing to draw: no instructions");
    }
    inferno::flamegraph::from_lines(&mut opts, folded.lines(), &mut svg).context("drawing the flamegraph")?;
    Ok(svg)
}

/// How many functions the text tables list.
pub const TOP: usize = 30;

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// A text report of a call tree: the buckets, then the top functions by exclusive and by
/// inclusive instructions.
pub fn report(tree: &CallTree, names: &Names, title: &str) -> String {
    let total = tree.total();
    let funcs = tree.functions();
    let mut t = format!("## {title}\n\n{} wasm instructions in {} functions.\n\n", grouped(total), funcs.len());
    let mut buckets: HashMap<Bucket, u64> = HashMap::new();
    for f in &funcs {
        *buckets.entry(bucket(&names.get(f.func))).or_default() += f.exclusive;
    }
    t += "| bucket (exclusive) | instructions | share |\n|---|---:|---:|\n";
    for b in Bucket::ALL {
        let n = buckets.get(&b).copied().unwrap_or(0);
        let _ = writeln!(t, "| {} | {} | {:.1}% |", b.label(), grouped(n), pct(n, total));
    }
    if tree.outside() > 0 {
        let _ = writeln!(
            t,
            "| outside wasm functions | {} | {:.1}% |",
            grouped(tree.outside()),
            pct(tree.outside(), total)
        );
    }
    let table = |t: &mut String, rows: &[&FunctionCost]| {
        *t += "| exclusive | share | inclusive | share | bucket | function |\n|---:|---:|---:|---:|---|---|\n";
        for f in rows {
            let name = names.get(f.func);
            let _ = writeln!(
                t,
                "| {} | {:.1}% | {} | {:.1}% | {:?} | `{}` |",
                grouped(f.exclusive),
                pct(f.exclusive, total),
                grouped(f.inclusive),
                pct(f.inclusive, total),
                bucket(&name),
                name
            );
        }
    };
    let _ = write!(t, "\nTop {TOP} by exclusive instructions:\n\n");
    table(&mut t, &funcs.iter().take(TOP).collect::<Vec<_>>());
    let mut by_inclusive: Vec<&FunctionCost> = funcs.iter().collect();
    by_inclusive.sort_by(|a, b| b.inclusive.cmp(&a.inclusive).then(a.func.cmp(&b.func)));
    let _ = write!(t, "\nTop {TOP} by inclusive instructions:\n\n");
    table(&mut t, &by_inclusive[..by_inclusive.len().min(TOP)]);
    t
}

/// Where `bench --profile` writes, and the names it uses.
#[derive(Clone, Debug)]
pub struct Output {
    /// The directory of the files.
    pub dir: PathBuf,
    /// The module's function names.
    pub names: Names,
    /// Whether to attribute the Wasm pages touched to functions (`--profile-pages`).
    pub pages: bool,
}

/// What [`Output::write`] wrote for one benchmark.
#[derive(Clone, Debug)]
pub struct Written {
    /// The benchmark query's instructions (the profile's total).
    pub query: u64,
    /// The measured step's instructions, if the step was found between two marks.
    pub step: Option<u64>,
    /// The step's (else the query's) top functions by exclusive instructions: (name, share %).
    pub top: Vec<(String, f64)>,
    /// The step's (else the query's) flamegraph.
    pub svg: PathBuf,
}

impl Output {
    /// Writes `bench`'s profile: `<bench>.query.folded/.tsv/.svg` (the whole query: setup, step,
    /// checks), `<bench>.step.folded/.tsv/.svg` (canbench's measurement, when `measured` (its
    /// instructions) is found between two `performance_counter` calls) and `<bench>.txt` (the
    /// tables). Fails if the profile does not add up to `message` (the query's instructions).
    pub fn write(&self, bench: &str, profile: &Profile, message: u64, measured: Option<u64>) -> Result<Written> {
        if profile.total() != message {
            bail!("{bench}: the profile adds up to {} instructions, the message executed {message}", profile.total());
        }
        std::fs::create_dir_all(&self.dir).with_context(|| format!("creating {}", self.dir.display()))?;
        let file = |ext: &str| self.dir.join(format!("{bench}.{ext}"));
        let mut text = format!(
            "# {bench}: wasm instructions by function\n\nProfiled by `stablebench-runner bench --profile` (exclusive: executed with the \
             function on top of the stack, including the system API fees of its calls; inclusive: while it was on the stack).\n\n"
        );
        let query = profile.tree();
        let step = measured.and_then(|m| profile.step(m).map(|t| (m, t)));
        if let Some((m, t)) = &step {
            if t.total() != *m {
                bail!("{bench}: the step's profile adds up to {} instructions, canbench measured {m}", t.total());
            }
            text += &report(t, &self.names, "The measured step (canbench's `total`)");
            text += "\n";
        } else if let Some(m) = measured {
            let _ = writeln!(
                text,
                "No pair of performance_counter calls {m} instructions apart: the measured step is not one interval, so \
                 only the whole query is profiled.\n"
            );
        } else {
            text += "canbench's measurement is not one interval (`calls` > 1) or the query failed: only the whole query is \
                     profiled.\n\n";
        }
        text += &report(&query, &self.names, "The whole query (setup, measured step, checks)");
        if !profile.pages().is_empty() {
            text += &pages_report(profile, &self.names);
        }
        if profile.unbalanced() > 0 || profile.mismatched() > 0 {
            let _ = writeln!(
                text,
                "\n{} frames were left open by a trap, {} exits did not match the stack.",
                profile.unbalanced(),
                profile.mismatched()
            );
        }
        std::fs::write(file("txt"), text)?;
        let draw = |tree: &CallTree, kind: &str, what: &str| -> Result<PathBuf> {
            let folded = tree.folded(&self.names);
            std::fs::write(file(&format!("{kind}.folded")), &folded)?;
            std::fs::write(file(&format!("{kind}.tsv")), tree.functions_tsv(&self.names))?;
            let svg = flamegraph(
                &folded,
                &format!("{bench}: {what}"),
                &format!("{} wasm instructions", grouped(tree.total())),
            )?;
            let path = file(&format!("{kind}.svg"));
            std::fs::write(&path, svg)?;
            Ok(path)
        };
        let mut svg = draw(&query, "query", "the whole query")?;
        if let Some((_, t)) = &step {
            svg = draw(t, "step", "the measured step")?;
        }
        let shown = step.as_ref().map_or(&query, |(_, t)| t);
        let top = shown
            .functions()
            .iter()
            .take(3)
            .map(|f| (self.names.get(f.func), pct(f.exclusive, shown.total())))
            .collect();
        Ok(Written { query: message, step: step.map(|(m, _)| m), top, svg })
    }
}
