//! sysrepo's datastore-plugin performance test as a canister workload: store the whole datastore
//! on every change (sysrepo's default "JSON DS file" plugin) or only the diff in a database (its
//! MongoDB and Redis plugins).
//!
//! The `perf` YANG module's data is a [`Tree`]: the list `lst` keyed by `(k1, k2)` with the leaf
//! `l`, and the user-ordered list `usr-lst` keyed by `k`. A [`Store`] is a datastore plugin:
//! [`blob::BlobStore`] keeps the whole datastore as one JSON document in stable memory (loaded
//! and parsed whole, serialized and written whole: the JSON DS file analog, the baseline),
//! [`sqlite::SqliteStore`] and [`stable::StableStore`] store only the diff. A [`Session`] is a
//! sysrepo session: edits by XPath (`set_item_str`, `delete_item`), `apply_changes`, reads
//! (`get_data`, `get_item`), and optionally the running-datastore cache (the decoded datastore
//! kept in the heap, so reads and edits need no load; stores still go to the plugin).
//!
//! [`run`] runs one of the 22 tests (`stablebench_grid::sysrepo::Test`) as `sr_perf` does: setup
//! once, then the test `tries` times, returning the instructions of each try's timed part; or
//! fresh, with the setup repeated before every try. Every read is checked against a model and
//! every write test ends by comparing what the store holds with the model, so a wrong backend
//! fails the benchmark instead of reporting a number.
//!
//! Where the analog differs from sysrepo: a diff store applies an edit without loading the
//! datastore first (sysrepo loads the module's data to validate an edit on a non-cached
//! connection; a canister storing diffs needs no such load), and there is no YANG validation
//! pass. Both are what a canister would do; the report says so next to the numbers.

pub mod blob;
pub mod sqlite;
pub mod stable;

use std::collections::{BTreeMap, HashMap};

pub use stablebench_grid::sysrepo::{
    Setup, Test, CHANGE_SUBSCRIBERS, CHANGE_SUB_ROUNDS, LIVE_MAX_SIZE, MAX_TRY_SCOPE, SIZES, TESTS, TRIES,
};

use crate::kv::Probe;
use crate::{Error, Result};

/// A `lst` key: `(k1, k2)`.
pub type LstKey = (u32, String);

/// A datastore of the `perf` module.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ds {
    /// The running datastore (configuration).
    Running,
    /// The operational datastore: every stored item carries its origin as metadata.
    Operational,
}

impl Ds {
    /// Both datastores.
    pub const ALL: [Ds; 2] = [Ds::Running, Ds::Operational];

    /// `0` or `1`, to index per-datastore arrays.
    pub const fn index(self) -> usize {
        match self {
            Ds::Running => 0,
            Ds::Operational => 1,
        }
    }
}

/// The metadata sysrepo stores with operational data (its origin), stored with every
/// operational item by every backend.
pub const ORIGIN: &str = "ietf-origin:learned";

/// The `perf` module's data in one datastore, decoded.
#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// `lst` items by key; the value is the leaf `l` (`None`: the item exists without it).
    pub lst: BTreeMap<LstKey, Option<String>>,
    /// `usr-lst` items `(k, l)` in user order.
    usr: Vec<(u32, String)>,
    /// Position of each `usr-lst` key in `usr`.
    usr_index: HashMap<u32, usize>,
}

impl PartialEq for Tree {
    fn eq(&self, other: &Self) -> bool {
        self.lst == other.lst && self.usr == other.usr
    }
}

impl Eq for Tree {}

/// One change, as sysrepo's edit operations make them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Edit {
    /// `merge` of `lst[k1][k2]/l`: creates the item if missing and sets the leaf.
    Set {
        /// The item.
        key: LstKey,
        /// The leaf's value.
        l: String,
    },
    /// `create` of the leaf (`SR_EDIT_STRICT`): the apply fails if the item already has it.
    Create {
        /// The item.
        key: LstKey,
        /// The leaf's value.
        l: String,
    },
    /// Deletes the leaf `l` of an item; nothing if it is absent (non-strict `sr_delete_item`).
    DeleteLeaf {
        /// The item.
        key: LstKey,
    },
    /// Deletes every `lst` item (`/perf:cont/lst`).
    DeleteLst,
    /// Deletes the whole container (`/perf:cont`): `lst` and `usr-lst`.
    DeleteAll,
    /// `merge` of `usr-lst[k]/l`: a new item goes last (the default position in an ordered-by-user
    /// list), an existing one keeps its place and gets the value.
    SetUsr {
        /// The item's key.
        k: u32,
        /// The leaf's value.
        l: String,
    },
}

impl Tree {
    /// A tree with these `usr-lst` items in this order (a later duplicate key updates the first).
    pub fn with_usr(lst: BTreeMap<LstKey, Option<String>>, usr: impl IntoIterator<Item = (u32, String)>) -> Tree {
        let mut tree = Tree { lst, ..Tree::default() };
        for (k, l) in usr {
            tree.set_usr(k, l);
        }
        tree
    }

    /// `usr-lst` in user order.
    pub fn usr(&self) -> &[(u32, String)] {
        &self.usr
    }

    /// Whether the container holds nothing.
    pub fn is_empty(&self) -> bool {
        self.lst.is_empty() && self.usr.is_empty()
    }

    /// Sets `usr-lst[k]`; returns whether it changed.
    fn set_usr(&mut self, k: u32, l: String) -> bool {
        match self.usr_index.get(&k) {
            Some(&i) if self.usr[i].1 == l => false,
            Some(&i) => {
                self.usr[i].1 = l;
                true
            }
            None => {
                self.usr_index.insert(k, self.usr.len());
                self.usr.push((k, l));
                true
            }
        }
    }

    /// Applies `edits` in order: all of them, or (if a strict create fails) none. Returns whether
    /// anything changed: sysrepo stores nothing and notifies nobody when an apply's diff is empty
    /// (setting a leaf to the value it has, deleting what is absent).
    pub fn apply(&mut self, edits: &[Edit]) -> Result<bool> {
        validate(edits, |key| Ok(matches!(self.lst.get(key), Some(Some(_)))))?;
        let mut changed = false;
        for edit in edits {
            changed |= match edit {
                Edit::Set { key, l } | Edit::Create { key, l } => match self.lst.get_mut(key) {
                    Some(Some(old)) if old == l => false,
                    Some(leaf) => {
                        *leaf = Some(l.clone());
                        true
                    }
                    None => {
                        self.lst.insert(key.clone(), Some(l.clone()));
                        true
                    }
                },
                Edit::DeleteLeaf { key } => match self.lst.get_mut(key) {
                    Some(leaf) => leaf.take().is_some(),
                    None => false,
                },
                Edit::DeleteLst => {
                    let had = !self.lst.is_empty();
                    self.lst.clear();
                    had
                }
                Edit::DeleteAll => {
                    let had = !self.is_empty();
                    self.lst.clear();
                    self.usr.clear();
                    self.usr_index.clear();
                    had
                }
                Edit::SetUsr { k, l } => self.set_usr(*k, l.clone()),
            };
        }
        Ok(changed)
    }
}

/// Fails if a strict [`Edit::Create`] in `edits` would create a leaf that exists, taking the
/// earlier edits of the same batch into account; `has_leaf` says whether the stored item has its
/// leaf. Every store validates before it writes, so a failed apply changes nothing.
pub fn validate(edits: &[Edit], mut has_leaf: impl FnMut(&LstKey) -> Result<bool>) -> Result<()> {
    let mut overlay: HashMap<&LstKey, bool> = HashMap::new();
    let mut cleared = false;
    for edit in edits {
        match edit {
            Edit::Set { key, .. } => {
                overlay.insert(key, true);
            }
            Edit::Create { key, .. } => {
                let exists = match overlay.get(key) {
                    Some(&exists) => exists,
                    None => !cleared && has_leaf(key)?,
                };
                if exists {
                    return Err(Error::InvalidArgument(format!(
                        "create: /perf:cont/lst[k1='{}'][k2='{}']/l already exists",
                        key.0, key.1
                    )));
                }
                overlay.insert(key, true);
            }
            Edit::DeleteLeaf { key } => {
                overlay.insert(key, false);
            }
            Edit::DeleteLst | Edit::DeleteAll => {
                cleared = true;
                overlay.clear();
            }
            Edit::SetUsr { .. } => {}
        }
    }
    Ok(())
}

/// A datastore plugin: where the `perf` module's data is stored.
pub trait Store {
    /// The whole datastore `ds`, decoded (sysrepo loading a module's data from its plugin).
    fn load(&mut self, ds: Ds) -> Result<Tree>;
    /// The leaf of one `lst` item (a key path): `None` if the item does not exist, `Some(None)`
    /// if it exists without the leaf. A database looks up one row; a whole-datastore store loads
    /// everything.
    fn get(&mut self, ds: Ds, key: &LstKey) -> Result<Option<Option<String>>>;
    /// Stores `edits` on `ds` as one transaction: all of them or, on an error, none. `after` is
    /// the whole datastore with the edits applied when the session keeps it decoded (cached): a
    /// whole-datastore store writes it instead of loading and applying; diff stores ignore it.
    fn apply(&mut self, ds: Ds, edits: &[Edit], after: Option<&Tree>) -> Result<()>;
}

/// What an XPath of the `perf` module addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Path {
    /// `/perf:cont`.
    Cont,
    /// `/perf:cont/lst`.
    Lst,
    /// The leaf `l` of one `lst` item. `key_path`: written as key predicates
    /// (`[k1='1'][k2='str1']`), which sysrepo resolves by looking up one item; `false` for an
    /// expression (`[k1='1' and k2='str1']`), for which it loads the whole datastore.
    LstLeaf {
        /// The item.
        key: LstKey,
        /// Whether the path is a key path.
        key_path: bool,
    },
    /// The leaf `l` of one `usr-lst` item.
    UsrLeaf {
        /// The item's key.
        k: u32,
    },
}

impl Path {
    /// Parses the XPaths `sr_perf` uses. Anything else is an [`Error::InvalidArgument`].
    pub fn parse(xpath: &str) -> Result<Path> {
        let bad = || Error::InvalidArgument(format!("unsupported XPath {xpath:?}"));
        let rest = xpath.strip_prefix("/perf:cont").ok_or_else(bad)?;
        if rest.is_empty() {
            return Ok(Path::Cont);
        }
        if rest == "/lst" {
            return Ok(Path::Lst);
        }
        let number = |s: &str| s.parse::<u32>().map_err(|_| bad());
        if let Some(p) = rest.strip_prefix("/usr-lst[k='") {
            let k = p.strip_suffix("']/l").ok_or_else(bad)?;
            return Ok(Path::UsrLeaf { k: number(k)? });
        }
        let p = rest.strip_prefix("/lst[k1='").ok_or_else(bad)?.strip_suffix("']/l").ok_or_else(bad)?;
        let (k1, k2, key_path) = if let Some((k1, k2)) = p.split_once("'][k2='") {
            (k1, k2, true)
        } else if let Some((k1, k2)) = p.split_once("' and k2='") {
            (k1, k2, false)
        } else {
            return Err(bad());
        };
        if k2.contains('\'') {
            return Err(bad());
        }
        Ok(Path::LstLeaf { key: (number(k1)?, k2.to_string()), key_path })
    }
}

/// A subscriber to changes of a datastore (`sr_module_change_subscribe`): every apply hands it
/// the changes, which it walks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Subscriber {
    /// Changes seen.
    pub changes: u64,
    /// Bytes of keys and values seen.
    pub bytes: u64,
}

impl Subscriber {
    fn notify(&mut self, edits: &[Edit]) {
        for edit in edits {
            self.changes += 1;
            self.bytes += Self::bytes_of(edit);
        }
    }

    /// The bytes of keys and values a subscriber walks in one change: a 4-byte integer key plus
    /// the strings.
    fn bytes_of(edit: &Edit) -> u64 {
        (match edit {
            Edit::Set { key, l } | Edit::Create { key, l } => 4 + key.1.len() + l.len(),
            Edit::DeleteLeaf { key } => 4 + key.1.len(),
            Edit::SetUsr { l, .. } => 4 + l.len(),
            Edit::DeleteLst | Edit::DeleteAll => 0,
        }) as u64
    }
}

/// A sysrepo session on a [`Store`]: edits collected by XPath and applied as one transaction,
/// reads, the running-datastore cache and change subscribers.
pub struct Session<'s, S: Store + ?Sized> {
    store: &'s mut S,
    cache: [Option<Tree>; 2],
    pending: Vec<Edit>,
    subscribers: [Vec<Subscriber>; 2],
}

impl<'s, S: Store + ?Sized> Session<'s, S> {
    /// A session without cache or subscribers.
    pub fn new(store: &'s mut S) -> Self {
        Session { store, cache: [None, None], pending: Vec::new(), subscribers: [Vec::new(), Vec::new()] }
    }

    /// Keeps `ds` decoded in the heap from now on (`sr_cache_running`): loads it once.
    pub fn cache(&mut self, ds: Ds) -> Result<()> {
        self.cache[ds.index()] = Some(self.store.load(ds)?);
        Ok(())
    }

    /// Adds `n` change subscribers to `ds`.
    pub fn subscribe(&mut self, ds: Ds, n: usize) {
        self.subscribers[ds.index()].extend(std::iter::repeat_n(Subscriber::default(), n));
    }

    /// The subscribers of `ds`.
    pub fn subscribers(&self, ds: Ds) -> &[Subscriber] {
        &self.subscribers[ds.index()]
    }

    /// The store underneath.
    pub fn store(&mut self) -> &mut S {
        self.store
    }

    fn whole(&mut self, ds: Ds) -> Result<Tree> {
        match &self.cache[ds.index()] {
            Some(tree) => Ok(tree.clone()),
            None => self.store.load(ds),
        }
    }

    /// `sr_get_data`: the data the XPath selects, with its parents (`/perf:cont`: everything).
    /// A key path is one lookup (in the cache, or the store's); anything else loads the whole
    /// datastore (or copies the cache) and filters it.
    pub fn get_data(&mut self, ds: Ds, xpath: &str) -> Result<Tree> {
        match Path::parse(xpath)? {
            Path::Cont => self.whole(ds),
            Path::Lst => Ok(Tree { lst: self.whole(ds)?.lst, ..Tree::default() }),
            Path::LstLeaf { key, key_path: true } => {
                let leaf = match &self.cache[ds.index()] {
                    Some(tree) => tree.lst.get(&key).cloned(),
                    None => self.store.get(ds, &key)?,
                };
                Ok(Tree { lst: leaf.into_iter().map(|l| (key.clone(), l)).collect(), ..Tree::default() })
            }
            Path::LstLeaf { key, key_path: false } => {
                let mut all = self.whole(ds)?.lst;
                Ok(Tree { lst: all.remove(&key).map(|l| (key, l)).into_iter().collect(), ..Tree::default() })
            }
            Path::UsrLeaf { k } => {
                let tree = self.whole(ds)?;
                Ok(Tree::with_usr(BTreeMap::new(), tree.usr.into_iter().filter(|(key, _)| *key == k)))
            }
        }
    }

    /// `sr_get_item`: the value of one leaf (evaluated as [`Session::get_data`] does).
    pub fn get_item(&mut self, ds: Ds, xpath: &str) -> Result<Option<String>> {
        let tree = self.get_data(ds, xpath)?;
        Ok(match Path::parse(xpath)? {
            Path::LstLeaf { key, .. } => tree.lst.get(&key).cloned().flatten(),
            Path::UsrLeaf { .. } => tree.usr.first().map(|(_, l)| l.clone()),
            _ => return Err(Error::InvalidArgument(format!("{xpath} is not a leaf"))),
        })
    }

    /// `sr_set_item_str`: sets a leaf (`strict`: creates it, failing at apply if it exists).
    pub fn set_item_str(&mut self, xpath: &str, value: &str, strict: bool) -> Result<()> {
        let edit = match Path::parse(xpath)? {
            Path::LstLeaf { key, .. } if strict => Edit::Create { key, l: value.to_string() },
            Path::LstLeaf { key, .. } => Edit::Set { key, l: value.to_string() },
            Path::UsrLeaf { k } => Edit::SetUsr { k, l: value.to_string() },
            _ => return Err(Error::InvalidArgument(format!("{xpath} is not a leaf"))),
        };
        self.pending.push(edit);
        Ok(())
    }

    /// `sr_delete_item` (non-strict): deletes what the XPath selects, if anything.
    pub fn delete_item(&mut self, xpath: &str) -> Result<()> {
        let edit = match Path::parse(xpath)? {
            Path::Cont => Edit::DeleteAll,
            Path::Lst => Edit::DeleteLst,
            Path::LstLeaf { key, .. } => Edit::DeleteLeaf { key },
            Path::UsrLeaf { .. } => {
                return Err(Error::InvalidArgument(format!("{xpath}: usr-lst leaves are mandatory")))
            }
        };
        self.pending.push(edit);
        Ok(())
    }

    /// `sr_edit_batch(merge)`: adds edits built elsewhere (a whole tree at once).
    pub fn edit_batch(&mut self, edits: Vec<Edit>) {
        if self.pending.is_empty() {
            self.pending = edits;
        } else {
            self.pending.extend(edits);
        }
    }

    /// `sr_apply_changes`: stores the pending edits in `ds` as one transaction and notifies the
    /// subscribers. On a cached datastore the edits are applied to the heap copy first, and when
    /// they change nothing (an empty diff) nothing is stored and nobody is notified, as in
    /// sysrepo; without the cache the store decides (the whole-datastore store loads, applies and
    /// skips the write of an unchanged document; the diff stores run the edits, which change
    /// nothing). On an error nothing is stored and the edits are dropped; a cached datastore the
    /// store refused is loaded again.
    pub fn apply_changes(&mut self, ds: Ds) -> Result<()> {
        let edits = std::mem::take(&mut self.pending);
        let i = ds.index();
        let stored = match &mut self.cache[i] {
            Some(tree) => match tree.apply(&edits)? {
                false => return Ok(()),
                true => self.store.apply(ds, &edits, Some(tree)),
            },
            None => self.store.apply(ds, &edits, None),
        };
        if let Err(e) = stored {
            if self.cache[i].is_some() {
                self.cache(ds)?;
            }
            return Err(e);
        }
        for s in &mut self.subscribers[i] {
            s.notify(&edits);
        }
        Ok(())
    }
}

/// `/perf:cont/lst[k1='i'][k2='stri']/l`, or with `key_path = false` the expression form
/// `[k1='i' and k2='stri']`.
pub fn lst_xpath(i: u32, key_path: bool) -> String {
    if key_path {
        format!("/perf:cont/lst[k1='{i}'][k2='str{i}']/l")
    } else {
        format!("/perf:cont/lst[k1='{i}' and k2='str{i}']/l")
    }
}

/// `/perf:cont/usr-lst[k='i']/l`.
pub fn usr_xpath(i: u32) -> String {
    format!("/perf:cont/usr-lst[k='{i}']/l")
}

/// The key of `lst` item `i`: `(i, "str<i>")`.
pub fn lst_key(i: u32) -> LstKey {
    (i, format!("str{i}"))
}

/// The data set's value of item `i`'s leaf: `"l<i>"`.
pub fn leaf(i: u32) -> String {
    format!("l{i}")
}

/// `sr_perf`'s data set as one batch: `lst` items `0..n` (`k1 = i`, `k2 = "str<i>"`, `l =
/// "l<i>"`), built as a tree is (no XPath parsing).
pub fn lst_batch(n: u32) -> Vec<Edit> {
    (0..n).map(|i| Edit::Set { key: lst_key(i), l: leaf(i) }).collect()
}

/// The instructions of each try's timed part, in order.
pub type Samples = Vec<u64>;

fn check<T: PartialEq + std::fmt::Debug>(test: Test, what: &str, got: &T, expected: &T) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::WrongResult(format!("{}: {what}: got {got:?}, expected {expected:?}", test.name())))
    }
}

/// Runs `test` on `store` (empty, both datastores) with `n` items: its setup once (or before
/// every try when `fresh`), then `tries` tries, of which only the timed part is counted (as
/// `sr_perf` times it). Returns the instructions of each try; reads are checked against the
/// model as they return and the store's final contents at the end, so a wrong result is an
/// [`Error::WrongResult`].
pub fn run<S: Store + ?Sized, P: Probe>(
    test: Test,
    store: &mut S,
    n: u32,
    tries: u32,
    fresh: bool,
    probe: &P,
) -> Result<Samples> {
    run_from_stage(test, store, n, tries, fresh, probe, &mut || (test, fresh))
}

/// [`run`], which calls `stage` once the setup is done, if the test has one ([`Test::setup`]):
/// the tries are those of the test (and `fresh`) it returns, which must have the same setup. A
/// benchmark canister reports its setup stage there (where the runner may go on as another cell
/// with the same setup, see `stablebench_grid::cells::Stage`).
pub fn run_from_stage<S: Store + ?Sized, P: Probe>(
    mut test: Test,
    store: &mut S,
    n: u32,
    tries: u32,
    mut fresh: bool,
    probe: &P,
    stage: &mut dyn FnMut() -> (Test, bool),
) -> Result<Samples> {
    if fresh && !test.has_quirk() {
        return Err(Error::InvalidArgument(format!("{} has no fresh variant", test.name())));
    }
    let mid = n / 2;
    let ds = match test {
        Test::GetOperTree | Test::CreateAllItemsOper | Test::ManyOperChangeSubs | Test::CreateAnItemOper => {
            Ds::Operational
        }
        _ => Ds::Running,
    };
    let mut model = Tree::default();
    let mut session = Session::new(store);
    // The setup (never timed): what the store holds before the first try.
    let setup = |session: &mut Session<S>, model: &mut Tree| -> Result<()> {
        // As the grid declares it (tests with the same setup share it, see `Test::setup`).
        let edits = match test.setup() {
            Setup::UserOrderedItems => (0..n).map(|i| Edit::SetUsr { k: i, l: leaf(i) }).collect(),
            Setup::Nothing => return Ok(()),
            Setup::Items | Setup::OperationalItems => lst_batch(n),
        };
        model.apply(&edits)?;
        session.edit_batch(edits);
        session.apply_changes(ds)
    };
    setup(&mut session, &mut model)?;
    if test.setup() != Setup::Nothing {
        let setup = test.setup();
        (test, fresh) = stage();
        if test.setup() != setup || (fresh && !test.has_quirk()) {
            return Err(Error::InvalidArgument(format!("{} cannot go on from this setup", test.name())));
        }
    }
    if test.cached() {
        session.cache(ds)?;
    }
    if test == Test::ManyOperChangeSubs {
        session.subscribe(ds, CHANGE_SUBSCRIBERS);
    }
    let mid_key = lst_key(mid);
    let mid_path = lst_xpath(mid, true);
    let mut samples = Vec::with_capacity(tries as usize);
    // What get oper tree must return: the N items, built here by the model (the callback builds
    // them another way, inside the timer).
    let oper_tree = if test == Test::GetOperTree {
        let mut t = Tree::default();
        t.apply(&lst_batch(n))?;
        Some(t)
    } else {
        None
    };
    for try_ in 0..tries {
        if fresh && try_ > 0 {
            // Put back what try 1 found (untimed), so that every try does the real work.
            let edits = match test {
                Test::ModifyAnItem | Test::ModifyAnItemCached | Test::RemoveAnItem | Test::RemoveAnItemCached => {
                    vec![Edit::Set { key: mid_key.clone(), l: leaf(mid) }]
                }
                _ => lst_batch(n),
            };
            model.apply(&edits)?;
            session.edit_batch(edits);
            session.apply_changes(ds)?;
        }
        // Untimed preparation inside the try.
        if matches!(test, Test::CreateAnItem | Test::CreateAnItemCached | Test::CreateAnItemOper) {
            session.delete_item(&mid_path)?;
            session.apply_changes(ds)?;
            model.apply(&[Edit::DeleteLeaf { key: mid_key.clone() }])?;
        }
        let mut item = None;
        let mut oper_reply = Vec::new();
        probe.message_starts();
        let start = probe.instructions();
        // The timed part; what it returns is checked after the timer stops.
        let got: Option<Tree> = match test {
            Test::GetTree => Some(session.get_data(ds, &lst_xpath(mid, false))?),
            Test::GetItem => {
                item = Some(session.get_item(ds, &lst_xpath(mid, false))?);
                None
            }
            Test::GetTreeHash | Test::GetTreeHashCached => Some(session.get_data(ds, &mid_path)?),
            Test::GetUserOrderedTree => Some(session.get_data(ds, "/perf:cont")?),
            Test::GetOperTree => {
                let (tree, reply) = oper_callback(n);
                oper_reply = reply;
                Some(tree)
            }
            Test::CreateBatch => {
                session.edit_batch(lst_batch(n));
                session.apply_changes(ds)?;
                None
            }
            Test::CreateUserOrderedItems => {
                for i in 0..n {
                    session.set_item_str(&usr_xpath(i), &leaf(i), false)?;
                }
                session.apply_changes(ds)?;
                None
            }
            Test::CreateAllItems | Test::CreateAllItemsOper => {
                for i in 0..n {
                    session.set_item_str(&lst_xpath(i, true), &leaf(i), false)?;
                }
                session.apply_changes(ds)?;
                None
            }
            Test::ManyOperChangeSubs => {
                for _ in 0..CHANGE_SUB_ROUNDS {
                    for i in 0..n {
                        session.set_item_str(&lst_xpath(i, true), &leaf(i), false)?;
                    }
                    session.apply_changes(ds)?;
                    session.delete_item("/perf:cont/lst")?;
                    session.apply_changes(ds)?;
                }
                None
            }
            Test::RemoveAllItems | Test::RemoveAllItemsCached => {
                session.delete_item("/perf:cont/lst")?;
                session.apply_changes(ds)?;
                None
            }
            Test::RemoveWholeSubtree | Test::RemoveWholeSubtreeCached => {
                session.delete_item("/perf:cont")?;
                session.apply_changes(ds)?;
                None
            }
            Test::CreateAnItem | Test::CreateAnItemCached => {
                session.set_item_str(&mid_path, &leaf(mid), true)?;
                session.apply_changes(ds)?;
                None
            }
            Test::CreateAnItemOper => {
                session.set_item_str(&mid_path, &leaf(mid), false)?;
                session.apply_changes(ds)?;
                None
            }
            Test::ModifyAnItem | Test::ModifyAnItemCached => {
                session.set_item_str(&mid_path, "l1", false)?;
                session.apply_changes(ds)?;
                None
            }
            Test::RemoveAnItem | Test::RemoveAnItemCached => {
                session.delete_item(&mid_path)?;
                session.apply_changes(ds)?;
                None
            }
        };
        samples.push(probe.instructions().saturating_sub(start));
        // The model follows (untimed), and reads are checked.
        match test {
            Test::GetTree | Test::GetTreeHash | Test::GetTreeHashCached => {
                let expected = Tree { lst: BTreeMap::from([(mid_key.clone(), Some(leaf(mid)))]), ..Tree::default() };
                check(test, "item N/2", got.as_ref().expect("a read"), &expected)?;
            }
            Test::GetItem => check(test, "item N/2's leaf", &item, &Some(Some(leaf(mid))))?,
            Test::GetUserOrderedTree => check(test, "/perf:cont", got.as_ref().expect("a read"), &model)?,
            Test::GetOperTree => {
                let expected = oper_tree.as_ref().expect("built");
                check(test, "the callback's tree", got.as_ref().expect("a read"), expected)?;
                check(test, "the callback's serialized reply", &blob::from_json(&oper_reply)?, expected)?;
            }
            Test::CreateBatch | Test::CreateAllItems | Test::CreateAllItemsOper => {
                model.apply(&lst_batch(n))?;
                check_store(test, &mut session, ds, &model)?;
                // perf.c deletes the items again outside the timer.
                session.delete_item("/perf:cont/lst")?;
                session.apply_changes(ds)?;
                model.apply(&[Edit::DeleteLst])?;
            }
            Test::CreateUserOrderedItems => {
                model.apply(&(0..n).map(|i| Edit::SetUsr { k: i, l: leaf(i) }).collect::<Vec<_>>())?;
                check_store(test, &mut session, ds, &model)?;
                session.delete_item("/perf:cont")?;
                session.apply_changes(ds)?;
                model.apply(&[Edit::DeleteAll])?;
            }
            Test::ManyOperChangeSubs => {}
            Test::RemoveAllItems | Test::RemoveAllItemsCached => {
                model.apply(&[Edit::DeleteLst])?;
            }
            Test::RemoveWholeSubtree | Test::RemoveWholeSubtreeCached => {
                model.apply(&[Edit::DeleteAll])?;
            }
            Test::CreateAnItem | Test::CreateAnItemCached | Test::CreateAnItemOper => {
                model.apply(&[Edit::Set { key: mid_key.clone(), l: leaf(mid) }])?;
            }
            Test::ModifyAnItem | Test::ModifyAnItemCached => {
                model.apply(&[Edit::Set { key: mid_key.clone(), l: "l1".to_string() }])?;
            }
            Test::RemoveAnItem | Test::RemoveAnItemCached => {
                model.apply(&[Edit::DeleteLeaf { key: mid_key.clone() }])?;
            }
        }
    }
    if test == Test::ManyOperChangeSubs {
        // Every subscriber saw every change: per round n sets and one delete, twice applied.
        let per_try = u64::from(CHANGE_SUB_ROUNDS) * (u64::from(n) + 1);
        let expected = Subscriber {
            changes: per_try * u64::from(tries),
            bytes: u64::from(CHANGE_SUB_ROUNDS)
                * u64::from(tries)
                * lst_batch(n).iter().map(Subscriber::bytes_of).sum::<u64>(),
        };
        for s in session.subscribers(ds) {
            check(test, "a subscriber", s, &expected)?;
        }
    }
    check_store(test, &mut session, ds, &model)?;
    Ok(samples)
}

/// The operational tree a `sr_oper_get_subscribe` callback builds for "get oper tree": `n`
/// `lst` items, serialized as the reply would carry them. Returns the tree and the reply.
fn oper_callback(n: u32) -> (Tree, Vec<u8>) {
    let tree = Tree {
        lst: lst_batch(n)
            .into_iter()
            .map(|e| match e {
                Edit::Set { key, l } => (key, Some(l)),
                _ => unreachable!("lst_batch makes sets"),
            })
            .collect(),
        ..Tree::default()
    };
    let reply = blob::to_json(&tree, Ds::Operational);
    (tree, reply)
}

/// Compares what the store holds (loaded past any cache) with the model.
fn check_store<S: Store + ?Sized>(test: Test, session: &mut Session<S>, ds: Ds, model: &Tree) -> Result<()> {
    let stored = session.store().load(ds)?;
    if stored == *model {
        Ok(())
    } else {
        Err(Error::WrongResult(format!(
            "{}: the store holds {} lst and {} usr-lst items, the model {} and {}",
            test.name(),
            stored.lst.len(),
            stored.usr.len(),
            model.lst.len(),
            model.usr.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xpaths_parse_as_sr_perf_writes_them() {
        assert_eq!(Path::parse("/perf:cont").unwrap(), Path::Cont);
        assert_eq!(Path::parse("/perf:cont/lst").unwrap(), Path::Lst);
        assert_eq!(Path::parse(&lst_xpath(7, true)).unwrap(), Path::LstLeaf { key: lst_key(7), key_path: true });
        assert_eq!(Path::parse(&lst_xpath(7, false)).unwrap(), Path::LstLeaf { key: lst_key(7), key_path: false });
        assert_eq!(Path::parse(&usr_xpath(3)).unwrap(), Path::UsrLeaf { k: 3 });
        for bad in ["/other:cont", "/perf:cont/lst[k1='x'][k2='s']/l", "/perf:cont/lst[k1='1']/l", "/perf:cont/x"] {
            assert!(matches!(Path::parse(bad), Err(Error::InvalidArgument(_))), "{bad}");
        }
    }

    #[test]
    fn a_strict_create_of_an_existing_leaf_fails_and_changes_nothing() {
        let mut tree = Tree::default();
        tree.apply(&lst_batch(3)).unwrap();
        let before = tree.clone();
        let edits = [Edit::Set { key: lst_key(9), l: "x".into() }, Edit::Create { key: lst_key(1), l: "y".into() }];
        assert!(matches!(tree.apply(&edits), Err(Error::InvalidArgument(_))));
        assert_eq!(tree, before);
        // After a delete in the same batch the create is fine.
        let edits = [Edit::DeleteLeaf { key: lst_key(1) }, Edit::Create { key: lst_key(1), l: "y".into() }];
        tree.apply(&edits).unwrap();
        assert_eq!(tree.lst[&lst_key(1)], Some("y".into()));
    }

    #[test]
    fn user_ordered_items_keep_their_first_position() {
        let mut tree = Tree::default();
        tree.apply(&[
            Edit::SetUsr { k: 5, l: "a".into() },
            Edit::SetUsr { k: 1, l: "b".into() },
            Edit::SetUsr { k: 5, l: "c".into() },
        ])
        .unwrap();
        assert_eq!(tree.usr(), &[(5, "c".to_string()), (1, "b".to_string())]);
        tree.apply(&[Edit::DeleteAll]).unwrap();
        assert!(tree.is_empty());
    }
}
