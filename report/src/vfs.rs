//! The ic-sqlite-vfs report: the two ways to put SQLite in a canister, side by side on the same
//! workloads (`docs/vfs.md`, the README's summary). ic-rusqlite runs under the key-value workloads' profile;
//! ic-sqlite-vfs under its own settings and with the same cache budget. Every number comes from
//! the committed results of both canisters; every sentence that ranks them is computed from them.

use std::fmt::Write;

use stablebench_grid::cells::{Backend, Cell, Op, BACKENDS, KV_PAGE_16K_PROFILE, TRIE_OPS, VFS_TRIE_SIZES};
use stablebench_grid::profiles::{self, Profile, VFS_CACHE_768MIB, VFS_DEFAULT, VFS_PROFILES, WORKLOADS};
use stablebench_grid::users_orders::{Bench, Sizes, BENCHES};

use super::kv::{phase_per_op_in, w_avg_per_op_in};
use super::results::Results;
use super::{int, mib, ratio_text};
use stablebench::kv::nodestore::Phase;

/// The generated report.
#[derive(Clone, Debug, Default)]
pub struct VfsReport {
    /// `docs/vfs.md`.
    pub markdown: String,
    /// The README's summary (between `<!-- vfs-summary -->` markers).
    pub readme: String,
}

/// ic-rusqlite's backend for an ic-sqlite-vfs backend: the same table layout.
const fn rusqlite_twin(b: Backend) -> Backend {
    match b {
        Backend::SqliteVfsRowid => Backend::SqliteRowid,
        _ => Backend::Sqlite,
    }
}

/// Instructions, heap growth and stable growth (wasm pages) of a users/orders step.
fn total(results: &Results, bench: Bench, backend: Backend, profile: Profile) -> Option<(u64, u64, u64)> {
    let cell = Cell::users_orders_at(bench, Sizes::REFERENCE.orders, backend, profile);
    results.get(&cell).map(|r| (r.total.instructions, r.total.heap_increase, r.total.stable_memory_increase))
}

/// "1.23x slower" of ic-sqlite-vfs against ic-rusqlite.
fn vs(vfs: f64, rusqlite: f64) -> String {
    ratio_text(vfs / rusqlite, 2, "same")
}

/// One SQLite setup of the key-value tables: a backend under a profile.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Kv {
    backend: Backend,
    profile: Option<Profile>,
}

impl Kv {
    /// The backend under its key-value profile.
    const fn of(backend: Backend) -> Kv {
        Kv { backend, profile: backend.kv_profile() }
    }

    /// The rows an ic-sqlite-vfs backend is compared with, in table order: its ic-rusqlite twin
    /// under the key-value workloads' profile, the twin with 16 KiB pages, and itself.
    const fn sqlite_rows(vfs: Backend) -> [Kv; 3] {
        let twin = rusqlite_twin(vfs);
        [Kv::of(twin), Kv { backend: twin, profile: Some(KV_PAGE_16K_PROFILE) }, Kv::of(vfs)]
    }

    /// `` `sqlite` 4 KiB ``: the backend and its page size, from the profile.
    fn label(&self) -> String {
        let page = self.profile.and_then(|p| p.pragmas.iter().find(|q| q.name == "page_size")).map(|q| q.value);
        match page.and_then(|v| v.parse::<u64>().ok()) {
            Some(bytes) => format!("`{}` {} KiB", self.backend.name(), bytes / 1024),
            None => format!("`{}`", self.backend.name()),
        }
    }
}

/// Which comparison a ratio belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bucket {
    /// ic-sqlite-vfs against ic-rusqlite under the key-value workloads' profile.
    VfsVs4k,
    /// ic-sqlite-vfs against ic-rusqlite with 16 KiB pages: the storage path and SQLite's build.
    VfsVs16k,
    /// ic-rusqlite with 16 KiB pages against its 4 KiB: the page size alone.
    Page16kVs4k,
}

/// What a ratio measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// A trie read (w_avg per read).
    Read,
    /// A trie write (w_avg per committed put).
    Write,
    /// A NodeStore insert phase (per object).
    Insert,
    /// A NodeStore fetch phase (per object).
    Fetch,
}

/// The ratios the tables computed, for the sentences that rank them.
#[derive(Default)]
struct Ratios(Vec<(Bucket, Class, Backend, f64)>);

impl Ratios {
    fn push(&mut self, bucket: Bucket, op: Op, backend: Backend, ratio: f64) {
        let class = if matches!(op, Op::TrieWrite(_)) { Class::Write } else { Class::Read };
        self.0.push((bucket, class, backend, ratio));
    }

    fn push_nodestore(&mut self, bucket: Bucket, phase: Phase, backend: Backend, ratio: f64) {
        let class = if phase.is_insert() { Class::Insert } else { Class::Fetch };
        self.0.push((bucket, class, backend, ratio));
    }

    /// The smallest and largest ratio of a comparison, for one backend (the numerator's) or all.
    fn span(&self, bucket: Bucket, class: Class, backend: Option<Backend>) -> Option<(f64, f64)> {
        span(
            self.0
                .iter()
                .filter(|(b, c, be, _)| *b == bucket && *c == class && backend.is_none_or(|x| x == *be))
                .map(|r| r.3),
        )
    }
}

/// The smallest and largest of some ratios, if there are any.
fn span(ratios: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    ratios.fold(None, |acc, r| Some(acc.map_or((r, r), |(lo, hi): (f64, f64)| (lo.min(r), hi.max(r)))))
}

/// Generates the report from the results of both canisters.
pub fn generate(results: &Results, command: &str, date: &str) -> VfsReport {
    if !results.any(|c| c.backend.canister() == stablebench_grid::cells::Canister::Vfs) {
        let none = "_Not measured yet: the `vfs/` results file has no results._\n".to_string();
        return VfsReport { markdown: format!("# SQLite: ic-rusqlite against ic-sqlite-vfs\n\n{none}"), readme: none };
    }
    let mut md = String::new();
    intro(&mut md, results, command, date);
    settings(&mut md);
    let uo_ratios = users_orders(&mut md, results);
    let mut ratios = Ratios::default();
    trie(&mut md, results, &mut ratios);
    nodestore(&mut md, results, &mut ratios);
    let choose = choose(&ratios, &uo_ratios);
    md.push_str("\n## Which to choose\n\n");
    md.push_str(&choose);
    build_notes(&mut md);
    let readme = format!(
        "ic-sqlite-vfs 2.1 against ic-rusqlite (`journal_memory_temp_file`), same SQL and Rust code, same cache \
         budget (`docs/vfs.md`, results of {date}):\n\n{choose}"
    );
    VfsReport { markdown: md, readme }
}

/// The page's head: what is compared, from which files.
fn intro(md: &mut String, results: &Results, command: &str, date: &str) {
    let _ = write!(
        md,
        "# SQLite: ic-rusqlite against ic-sqlite-vfs\n\n\
         Generated by `scripts/report.sh` from `{file}` and `vfs/{file}` ({command}, \
         results of {date}); do not edit. Instructions are {whose} (the offline runner, \
         {described}), fewer is better.\n\n\
         Two ways to put SQLite in a canister, on the same workloads, the same SQL and the same Rust code:\n\n\
         - **ic-rusqlite 0.5** (`canister/`): SQLite 3.53.0 over WASI, the WASI calls turned into \
         ic-wasi-polyfill's file system in stable memory by wasi2ic; the profile of the \
         key-value workloads, `{rec}` (the recommendation before the IC's memory tracker: a page \
         cache as large as the database, the budget `vfs_cache_768mib` gives ic-sqlite-vfs).\n\
         - **ic-sqlite-vfs 2.1** (`vfs/`, wasm32-unknown-unknown): its precompiled SQLite 3.53.4 (built at \
         `-Oz` with its own defines; ic-rusqlite's at `-O3` with libsqlite3-sys's) with \
         a VFS that writes pages straight into a stable-memory virtual memory. Writes go through \
         `Db::update` (one SQLite transaction; the pages it dirtied wait in a heap overlay and are \
         published to stable memory after COMMIT), reads through `Db::query` (a read-only connection, \
         which the library opens anew after every update). The workloads drive both libraries' \
         connections through rusqlite (`vfs/src/store.rs`), so the difference below is the storage \
         path, the library's commit protocol and SQLite's build, not the calling code.\n\n",
        rec = WORKLOADS.name,
        file = results.model().file(),
        whose = results.model().whose(),
        described = results.model().described(),
    );
}

/// The settings of both libraries side by side.
fn settings(md: &mut String) {
    md.push_str(
        "## Settings\n\n\
         ic-sqlite-vfs fixes its pragmas (`src/db/pragmas.rs`) except the per-connection `cache_size`, which \
         the canister sets on every connection the library opens and reads back:\n\n\
         | setting | ic-rusqlite, `journal_memory_temp_file` | ic-sqlite-vfs `vfs_default` | ic-sqlite-vfs `vfs_cache_768mib` |\n\
         |---|---|---|---|\n",
    );
    // The rows are the ic-rusqlite profile's pragmas, in the order it applies them.
    for name in WORKLOADS.pragmas.iter().map(|p| p.name) {
        let v = |p: Profile| p.pragmas.iter().find(|q| q.name == name).map_or("–", |q| q.value);
        let _ = writeln!(md, "| `{name}` | {} | {} | {} |", v(WORKLOADS), v(VFS_DEFAULT), v(VFS_CACHE_768MIB));
    }
    md.push_str(
        "\nWhat ic-sqlite-vfs does not allow: another page size (16 KiB is its VFS's unit: sector size and \
         overlay pages), temporary storage in files (its SQLite is built with `SQLITE_TEMP_STORE=3`, so \
         `temp_store = FILE`, which makes `journal_memory_temp_file`'s index build faster, has no effect), \
         and a transaction across two `Db::update` calls. A negative `cache_size` is KiB: `-786432` is the \
         768 MiB our canister allows its cache under the default 3 GiB `wasm_memory_limit`.\n\n",
    );
}

/// The users/orders table; returns ic-sqlite-vfs's cost against ic-rusqlite's per step.
fn users_orders(md: &mut String, results: &Results) -> Vec<(Bench, f64)> {
    md.push_str(
        "## Users/orders (reference size: 100,000 users, 1,000,000 orders)\n\n\
         Each step as one canbench query on a fresh canister; for ic-sqlite-vfs the measured step is one \
         `Db::update` whose SQLite transactions are the step's own, so its commit and publication are \
         measured. `journal_memory_temp_file_page_16k` is `journal_memory_temp_file` with ic-sqlite-vfs's 16 KiB \
         pages, and `memory` \
         ic-rusqlite's database in the heap (the floor). Memory growth is canbench-rs's, in the measured step: \
         ic-sqlite-vfs keeps a transaction's dirtied pages in a heap overlay until it publishes them, and \
         both libraries grow stable memory in the MemoryManager's 8 MiB buckets.\n\n\
         | step | ic-rusqlite `journal_memory_temp_file` | ic-rusqlite `journal_memory_temp_file_page_16k` | floor `memory` | ic-sqlite-vfs `vfs_default` | ic-sqlite-vfs `vfs_cache_768mib` | vfs_cache_768mib against ic-rusqlite | heap growth MiB (ic-rusqlite / vfs) | stable growth MiB (ic-rusqlite / vfs) |\n\
         |---|---:|---:|---:|---:|---:|---|---|---|\n",
    );
    let mut uo_ratios = Vec::new();
    for b in BENCHES {
        let Some((rec, rec_heap, rec_stable)) = total(results, b, Backend::Sqlite, WORKLOADS) else { continue };
        let cell = |p| total(results, b, Backend::Sqlite, p).map_or("–".to_string(), |(i, _, _)| int(i as f64));
        let vfs = VFS_PROFILES.map(|p| total(results, b, Backend::SqliteVfs, p));
        let [Some((d, _, _)), Some((c, c_heap, c_stable))] = vfs else { continue };
        uo_ratios.push((b, c as f64 / rec as f64));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} |",
            b.seed_row(),
            int(rec as f64),
            cell(KV_PAGE_16K_PROFILE),
            cell(profiles::MEMORY),
            int(d as f64),
            int(c as f64),
            vs(c as f64, rec as f64),
            mib(rec_heap),
            mib(c_heap),
            mib(rec_stable),
            mib(c_stable),
        );
    }

    uo_ratios
}

/// The DbWeight tables at each size, their ratios pushed to `ratios`.
fn trie(md: &mut String, results: &Results, ratios: &mut Ratios) {
    md.push_str(
        "\n## Key-value: Substrate's trie benchmark (the IC DbWeight)\n\n\
         Substrate's w_avg per operation: a read is one point lookup of a 32-byte key in `Db::query` \
         (ic-sqlite-vfs) or on the open connection (ic-rusqlite); a write is one upsert committed on its \
         own (one `Db::update`, or one autocommit statement). Warm: the caches as a running canister has \
         them; cold: emptied before every iteration, as after an upgrade. The map backends are the \
         baselines of `docs/kv.md`. ic-rusqlite runs twice: under `journal_memory_temp_file` (4 KiB pages) \
         and with ic-sqlite-vfs's 16 KiB pages (`journal_memory_temp_file_page_16k`, nothing else \
         changed), so that the page size and the storage path can be told apart.\n\n",
    );
    for size in VFS_TRIE_SIZES {
        let _ = writeln!(
            md,
            "### {} keys\n\n| backend | read warm | read cold | write warm | write cold |\n|---|---:|---:|---:|---:|",
            int(size as f64)
        );
        let w = |op: Op, kv: Kv| w_avg_per_op_in(results, op, size, kv.backend, kv.profile);
        for backend in BACKENDS.into_iter().filter(|b| !b.is_sqlite()) {
            let kv = Kv::of(backend);
            let cells: Vec<String> = TRIE_OPS.iter().map(|&op| w(op, kv).map_or("–".to_string(), int)).collect();
            let _ = writeln!(md, "| {} | {} |", backend.name(), cells.join(" | "));
        }
        for vfs in stablebench_grid::cells::VFS_BACKENDS {
            for kv in Kv::sqlite_rows(vfs) {
                let cells: Vec<String> = TRIE_OPS.iter().map(|&op| w(op, kv).map_or("–".to_string(), int)).collect();
                let _ = writeln!(md, "| {} | {} |", kv.label(), cells.join(" | "));
            }
        }
        let _ = writeln!(md, "| **ratios** | | | | |");
        for vfs in stablebench_grid::cells::VFS_BACKENDS {
            let [r4, r16, v] = Kv::sqlite_rows(vfs);
            for (num, den, bucket) in
                [(v, r4, Bucket::VfsVs4k), (v, r16, Bucket::VfsVs16k), (r16, r4, Bucket::Page16kVs4k)]
            {
                let cells: Vec<String> = TRIE_OPS
                    .iter()
                    .map(|&op| match (w(op, num), w(op, den)) {
                        (Some(x), Some(y)) => {
                            ratios.push(bucket, op, num.backend, x / y);
                            vs(x, y)
                        }
                        _ => "–".into(),
                    })
                    .collect();
                let _ = writeln!(md, "| {} against {} | {} |", num.label(), den.label(), cells.join(" | "));
            }
        }
        md.push('\n');
    }
}

/// The NodeStore tables, their ratios pushed to `ratios`.
fn nodestore(md: &mut String, results: &Results, ratios: &mut Ratios) {
    md.push_str(
        "## Key-value: rippled's NodeStore (objects of 1-2 KiB)\n\n\
         Instructions per object of each phase (`docs/kv.md` has the method), on the same three SQLite \
         setups as the trie.\n\n",
    );
    let columns: Vec<Kv> = stablebench_grid::cells::VFS_BACKENDS.into_iter().flat_map(Kv::sqlite_rows).collect();
    for n in stablebench_grid::cells::NODESTORE_SIZES {
        let header: Vec<String> = columns.iter().map(Kv::label).collect();
        let _ = writeln!(
            md,
            "### {} objects\n\n| phase | {} |\n|---|{}",
            int(n as f64),
            header.join(" | "),
            "---:|".repeat(columns.len())
        );
        for phase in Phase::ALL {
            let p = |kv: Kv| phase_per_op_in(results, kv.backend, kv.profile, n, phase);
            let cells: Vec<String> = columns.iter().map(|&kv| p(kv).map_or("–".to_string(), int)).collect();
            let _ = writeln!(md, "| {} | {} |", phase.title(), cells.join(" | "));
            for vfs in stablebench_grid::cells::VFS_BACKENDS {
                let [r4, r16, v] = Kv::sqlite_rows(vfs);
                for (num, den, bucket) in
                    [(v, r4, Bucket::VfsVs4k), (v, r16, Bucket::VfsVs16k), (r16, r4, Bucket::Page16kVs4k)]
                {
                    if let (Some(x), Some(y)) = (p(num), p(den)) {
                        ratios.push_nodestore(bucket, phase, num.backend, x / y);
                    }
                }
            }
        }
        md.push('\n');
    }
}

/// "Which to choose", every ranking computed from the ratios.
fn choose(ratios: &Ratios, uo_ratios: &[(Bench, f64)]) -> String {
    let (ulo, uhi) = span(uo_ratios.iter().map(|(_, r)| *r)).unwrap_or((f64::NAN, f64::NAN));
    let mut choose = String::new();
    let write_vs_4k = ratios.span(Bucket::VfsVs4k, Class::Write, None);
    let claim = match write_vs_4k {
        Some((lo, _)) if lo > 1.0 => {
            "more than ic-rusqlite, the opposite of its README's claim (\"6.5x fewer for insert/update\" than the \
             wasi2ic path, measured there against other settings); where it goes, from the wasm profiler: \
             docs/breakdown.md"
        }
        Some((_, hi)) if hi < 1.0 => "less than ic-rusqlite, as its README claims (though not by its 6.5x)",
        _ => "more or less than ic-rusqlite depending on size and cache",
    };
    let rng = |r: Option<(f64, f64)>| r.map_or("–".to_string(), |(lo, hi)| format!("{lo:.2}x to {hi:.2}x"));
    let bulk_geomean = (!uo_ratios.is_empty())
        .then(|| (uo_ratios.iter().map(|(_, r)| r.ln()).sum::<f64>() / uo_ratios.len() as f64).exp());
    let reads_same_page = ratios.span(Bucket::VfsVs16k, Class::Read, None);
    let verdict = match (write_vs_4k, bulk_geomean) {
        (Some((lo, hi)), Some(g)) if lo > 1.0 && g > 1.0 => format!(
            "**In plain words: choose ic-rusqlite.** Every measured commit costs \
             more on ic-sqlite-vfs ({lo:.2}x to {hi:.2}x), and the nine bulk steps cost {g:.2}x ic-rusqlite's in the geometric \
             mean. Its cheaper `WITHOUT ROWID` reads come from its 16 KiB pages, which ic-rusqlite can have too \
             (`page_size` 16384 before the first table, as `{page16k}` does): at the same page size its reads \
             cost {} of ic-rusqlite's. What speaks for ic-sqlite-vfs is outside these numbers: it builds for \
             wasm32-unknown-unknown with cargo alone, without wasi2ic.\n\n",
            rng(reads_same_page),
            page16k = KV_PAGE_16K_PROFILE.name,
        ),
        _ => "**In plain words:** neither library is cheaper everywhere; pick by the pattern that dominates your \
              canister, below.\n\n"
            .to_string(),
    };
    choose.push_str(&verdict);
    let _ = writeln!(
        choose,
        "- **One small write per message** (a key-value put committed on its own): ic-sqlite-vfs costs {} what \
         ic-rusqlite costs per commit here: {claim}. Its `Db::update` publishes the transaction's pages from a \
         heap overlay after COMMIT and updates its superblock every time. Not the page size: ic-rusqlite with \
         16 KiB pages writes at {} of its 4 KiB cost, and ic-sqlite-vfs costs {} of that.",
        rng(write_vs_4k),
        rng(ratios.span(Bucket::Page16kVs4k, Class::Write, None)),
        rng(ratios.span(Bucket::VfsVs16k, Class::Write, None)),
    );
    let _ = writeln!(
        choose,
        "- **Point reads**: ic-sqlite-vfs's cost {} of ic-rusqlite's (below 1 means cheaper; `WITHOUT ROWID` {}, \
         rowid {}). The page size: ic-rusqlite's own reads with 16 KiB pages cost {} of its 4 KiB reads \
         (`WITHOUT ROWID` {}), and ic-sqlite-vfs's reads {} of ic-rusqlite's at the same page size. In a \
         query method, though, every ic-sqlite-vfs call starts with a new read-only connection and an empty \
         cache (the library discards it at every update, and a query's heap changes are discarded anyway), \
         which the warm columns do not show.",
        rng(ratios.span(Bucket::VfsVs4k, Class::Read, None)),
        rng(ratios.span(Bucket::VfsVs4k, Class::Read, Some(Backend::SqliteVfs))),
        rng(ratios.span(Bucket::VfsVs4k, Class::Read, Some(Backend::SqliteVfsRowid))),
        rng(ratios.span(Bucket::Page16kVs4k, Class::Read, None)),
        rng(ratios.span(Bucket::Page16kVs4k, Class::Read, Some(Backend::Sqlite))),
        rng(ratios.span(Bucket::VfsVs16k, Class::Read, None)),
    );
    let _ = writeln!(
        choose,
        "- **Large rows in a `WITHOUT ROWID` table** (NodeStore's 1-2 KiB objects): SQLite keeps at most about \
         a quarter of a page of an index-tree entry on the page (sqlite.org fileformat2, \"the maximum amount \
         of payload that can be stored directly on the b-tree page\": (U - 12) x 64 / 255 - 23 bytes: 1,002 at \
         4 KiB, 4,086 at 16 KiB), so with 4 KiB pages every such row spills to an overflow page. ic-rusqlite \
         with 16 KiB pages fetches at {} of its 4 KiB cost and inserts at {}; ic-sqlite-vfs fetches at {} and \
         inserts at {} of ic-rusqlite's at 16 KiB.",
        rng(ratios.span(Bucket::Page16kVs4k, Class::Fetch, Some(Backend::Sqlite))),
        rng(ratios.span(Bucket::Page16kVs4k, Class::Insert, Some(Backend::Sqlite))),
        rng(ratios.span(Bucket::VfsVs16k, Class::Fetch, Some(Backend::SqliteVfs))),
        rng(ratios.span(Bucket::VfsVs16k, Class::Insert, Some(Backend::SqliteVfs))),
    );
    let _ = writeln!(
        choose,
        "- **Bulk SQL** (the nine users/orders steps): {ulo:.2}x to {uhi:.2}x of ic-rusqlite's cost with the \
         same cache budget; the users/orders table shows ic-rusqlite at 16 KiB too.\n\
         - **Query methods and upgrades**: the per-call table (`docs/per-call.md`) measures whole messages on both \
         (`sqlite_vfs_rowid` against `sqlite_rowid`): ic-sqlite-vfs opens a read-only connection in every \
         query call, and its `post_upgrade` has no file system to mount.",
    );
    choose
}

/// What was measured apart, and what not yet.
fn build_notes(md: &mut String) {
    md.push_str(
        "\n## SQLite's build\n\n\
         Measured apart, on 27 cells of ic-rusqlite's canister (`scripts/rusqlite-sqlite-build.sh`, \
         2026-11-25; not part of these results, so its figures are not repeated here: they are in `git show \
         d5f8092:docs/breakdown.md`, and docs/breakdown.md says what they showed): ic-rusqlite with \
         ic-sqlite-vfs's SQLite build (its 14 defines, `-Oz`) costs a few percent more in the median, more \
         on the bulk steps and most on the index build (its `SQLITE_TEMP_STORE=3`), and about the same on a \
         single-put commit. So the build explains most of ic-sqlite-vfs's extra cost on bulk SQL and none \
         of its extra cost per commit. Its defines alone save ic-rusqlite a little on key-value calls; the \
         one it can switch at run time (`SQLITE_CONFIG_MEMSTATUS` off) saves under one percent in the \
         median and is not adopted, since it disables SQLite's heap limits.\n\n\
         ## Not measured yet\n\n\
         - ic-sqlite-vfs's own statement API (its `prepare_cached`, `query_row`) instead of rusqlite over its \
         connections.\n\
         - SQLite for ic-rusqlite built with a current clang (WASI SDK) and a reduced set of defines: a \
         machine with rustup alone cannot build it, and Debian's clang 14 loses more to the shipped clang 20 \
         archive than the defines win.\n",
    );
}
