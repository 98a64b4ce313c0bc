//! sysrepo's datastore stores against the model: generated edit batches applied to each store and
//! to a `Tree`, with the same datastore required after every apply (both datastores, point
//! lookups included) and a refused batch required to change nothing; then all 22 tests of
//! `sr_perf` (and the fresh variants) on every store, cached and not, with their checks.

use ic_stable_structures::VectorMemory;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rusqlite::Connection;
use stablebench::kv::NoProbe;
use stablebench::sysrepo::blob::{self, BlobStore};
use stablebench::sysrepo::sqlite::{self, SqliteStore};
use stablebench::sysrepo::stable::StableStore;
use stablebench::sysrepo::{self, lst_key, Ds, Edit, Session, Store, Test, Tree, TESTS};
use stablebench::Error;

fn blob_store() -> BlobStore<VectorMemory> {
    BlobStore::new(VectorMemory::default(), VectorMemory::default()).unwrap()
}

fn stable_store() -> StableStore<VectorMemory> {
    StableStore::new(std::array::from_fn(|_| VectorMemory::default()))
}

fn sqlite_conn() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    sqlite::create(&conn).unwrap();
    conn
}

/// Runs `f` on each store, new and empty.
fn each_store(mut f: impl FnMut(&str, &mut dyn Store)) {
    each_store_result(|name, store| {
        f(name, store);
        Ok(())
    })
    .expect("f does not fail");
}

fn edit() -> impl Strategy<Value = Edit> {
    // A small key space, so that edits of one batch collide.
    let key = (0u32..6).prop_map(lst_key);
    let value = "[a-z]{0,6}";
    prop_oneof![
        6 => (key.clone(), value).prop_map(|(key, l)| Edit::Set { key, l }),
        3 => (key.clone(), value).prop_map(|(key, l)| Edit::Create { key, l }),
        3 => key.prop_map(|key| Edit::DeleteLeaf { key }),
        1 => Just(Edit::DeleteLst),
        1 => Just(Edit::DeleteAll),
        4 => (0u32..6, value).prop_map(|(k, l)| Edit::SetUsr { k, l }),
    ]
}

fn batches() -> impl Strategy<Value = Vec<(bool, Vec<Edit>)>> {
    // (operational?, edits)
    prop::collection::vec((any::<bool>(), prop::collection::vec(edit(), 0..8)), 1..12)
}

fn check_against_model(store: &mut dyn Store, batches: &[(bool, Vec<Edit>)]) -> Result<(), TestCaseError> {
    let mut models = [Tree::default(), Tree::default()];
    for (i, (oper, edits)) in batches.iter().enumerate() {
        let ds = if *oper { Ds::Operational } else { Ds::Running };
        let model = &mut models[ds.index()];
        let expected = model.apply(edits);
        let got = store.apply(ds, edits, None);
        prop_assert_eq!(got.is_ok(), expected.is_ok(), "batch {}: {:?} vs {:?}", i, got, expected);
        if let Err(e) = got {
            prop_assert!(matches!(e, Error::InvalidArgument(_)), "batch {}: {}", i, e);
        }
        for ds in Ds::ALL {
            let stored = store.load(ds).unwrap();
            prop_assert_eq!(&stored, &models[ds.index()], "batch {}, {:?}", i, ds);
            prop_assert_eq!(stored.usr(), models[ds.index()].usr(), "batch {}: user order", i);
            for k in 0..6 {
                let key = lst_key(k);
                prop_assert_eq!(store.get(ds, &key).unwrap(), models[ds.index()].lst.get(&key).cloned());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_blob_store_matches_the_model(batches in batches()) {
        check_against_model(&mut blob_store(), &batches)?;
    }

    #[test]
    fn the_stable_btreemap_store_matches_the_model(batches in batches()) {
        check_against_model(&mut stable_store(), &batches)?;
    }

    #[test]
    fn the_sqlite_store_matches_the_model(batches in batches()) {
        let conn = sqlite_conn();
        check_against_model(&mut SqliteStore::new(&conn), &batches)?;
    }

    /// A cached session (both datastores cached) answers as the store would, keeps every store in
    /// step, and skips the store when an apply changes nothing.
    #[test]
    fn a_cached_session_matches_the_model(batches in batches()) {
        each_store_result(|name, store| {
            let mut models = [Tree::default(), Tree::default()];
            let mut session = Session::new(store);
            session.cache(Ds::Running).unwrap();
            session.cache(Ds::Operational).unwrap();
            for (oper, edits) in &batches {
                let ds = if *oper { Ds::Operational } else { Ds::Running };
                let expected = models[ds.index()].apply(edits);
                session.edit_batch(edits.clone());
                prop_assert_eq!(session.apply_changes(ds).is_ok(), expected.is_ok(), "{}", name);
                for ds in Ds::ALL {
                    prop_assert_eq!(&session.get_data(ds, "/perf:cont").unwrap(), &models[ds.index()], "{}", name);
                    prop_assert_eq!(&session.store().load(ds).unwrap(), &models[ds.index()], "{}", name);
                }
            }
            Ok(())
        })?;
    }
}

/// Runs `f` on each store, new and empty, stopping at the first failure.
fn each_store_result(
    mut f: impl FnMut(&str, &mut dyn Store) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    f("blob", &mut blob_store())?;
    f("stable_btreemap", &mut stable_store())?;
    let conn = sqlite_conn();
    f("sqlite", &mut SqliteStore::new(&conn))
}

/// An apply that changes nothing is not stored (sysrepo: "there is no diff, nothing to store"):
/// an uncached blob store loads and compares but does not rewrite the document, and a cached
/// session notifies nobody.
#[test]
fn an_empty_diff_stores_nothing() {
    use ic_stable_structures::Memory;
    let mut tree = Tree::default();
    assert!(tree.apply(&sysrepo::lst_batch(3)).unwrap());
    assert!(!tree.apply(&[Edit::Set { key: lst_key(1), l: "l1".into() }]).unwrap(), "the value it has");
    assert!(!tree.apply(&[Edit::DeleteLeaf { key: lst_key(9) }]).unwrap(), "an absent item");
    assert!(tree.apply(&[Edit::DeleteLeaf { key: lst_key(1) }]).unwrap());
    assert!(!tree.apply(&[Edit::DeleteLeaf { key: lst_key(1) }]).unwrap(), "a leaf already gone");

    let (r, o) = (VectorMemory::default(), VectorMemory::default());
    let mut store = BlobStore::new(r.clone(), o).unwrap();
    store.apply(Ds::Running, &sysrepo::lst_batch(3), None).unwrap();
    // The same datastore written with spaces: a rewrite would remove them.
    let spaced = String::from_utf8(store.read(Ds::Running)).unwrap().replace(',', ", ").into_bytes();
    r.write(8, &spaced);
    r.write(0, &(spaced.len() as u64).to_le_bytes());
    let mut session = Session::new(&mut store);
    session.set_item_str(&sysrepo::lst_xpath(1, true), "l1", false).unwrap();
    session.apply_changes(Ds::Running).unwrap();
    assert_eq!(store.read(Ds::Running), spaced, "a no-op apply rewrote the document");
    let mut session = Session::new(&mut store);
    session.set_item_str(&sysrepo::lst_xpath(1, true), "changed", false).unwrap();
    session.apply_changes(Ds::Running).unwrap();
    assert_ne!(store.read(Ds::Running), spaced, "a real change is written");

    let mut session = Session::new(&mut store);
    session.cache(Ds::Running).unwrap();
    session.subscribe(Ds::Running, 1);
    session.set_item_str(&sysrepo::lst_xpath(2, true), "l2", false).unwrap();
    session.apply_changes(Ds::Running).unwrap();
    assert_eq!(session.subscribers(Ds::Running)[0].changes, 0);
    session.set_item_str(&sysrepo::lst_xpath(2, true), "new", false).unwrap();
    session.apply_changes(Ds::Running).unwrap();
    assert_eq!(session.subscribers(Ds::Running)[0].changes, 1);
}

#[test]
fn the_json_document_has_libyangs_shape_and_round_trips() {
    let mut tree = Tree::default();
    tree.apply(&[
        Edit::Set { key: lst_key(1), l: "l1".into() },
        Edit::Set { key: lst_key(2), l: "x".into() },
        Edit::DeleteLeaf { key: lst_key(2) },
        Edit::SetUsr { k: 7, l: "u".into() },
    ])
    .unwrap();
    let json = String::from_utf8(blob::to_json(&tree, Ds::Running)).unwrap();
    assert_eq!(
        json,
        r#"{"perf:cont":{"lst":[{"k1":1,"k2":"str1","l":"l1"},{"k1":2,"k2":"str2"}],"usr-lst":[{"k":7,"l":"u"}]}}"#
    );
    assert_eq!(blob::from_json(json.as_bytes()).unwrap(), tree);
    let oper = String::from_utf8(blob::to_json(&tree, Ds::Operational)).unwrap();
    assert!(oper.contains(r#""@":{"ietf-origin:origin":"ietf-origin:learned"}"#), "{oper}");
    assert_eq!(blob::from_json(oper.as_bytes()).unwrap(), tree);
    assert_eq!(blob::to_json(&Tree::default(), Ds::Running), b"{}");
    assert!(matches!(blob::from_json(b"{\"perf:cont\":"), Err(Error::InvalidArgument(_))));
}

#[test]
fn every_test_runs_and_checks_on_every_store() {
    for test in TESTS {
        for fresh in [false, true] {
            if fresh && !test.has_quirk() {
                continue;
            }
            each_store(|name, store| {
                let samples = sysrepo::run(test, store, 40, 3, fresh, &NoProbe)
                    .unwrap_or_else(|e| panic!("{} on {name} (fresh {fresh}): {e}", test.name()));
                assert_eq!(samples.len(), 3);
            });
        }
    }
}

#[test]
fn a_test_without_a_quirk_has_no_fresh_variant() {
    let mut store = blob_store();
    assert!(matches!(sysrepo::run(Test::GetTree, &mut store, 10, 1, true, &NoProbe), Err(Error::InvalidArgument(_))));
}

/// The check at the end of a test sees what the store holds: a store that loses an edit fails it.
#[test]
fn a_store_that_drops_edits_fails_the_test() {
    struct Forgetful(BlobStore<VectorMemory>);
    impl Store for Forgetful {
        fn load(&mut self, ds: Ds) -> stablebench::Result<Tree> {
            self.0.load(ds)
        }
        fn get(&mut self, ds: Ds, key: &sysrepo::LstKey) -> stablebench::Result<Option<Option<String>>> {
            self.0.get(ds, key)
        }
        fn apply(&mut self, ds: Ds, edits: &[Edit], after: Option<&Tree>) -> stablebench::Result<()> {
            // Drops every delete of a leaf.
            let kept: Vec<Edit> = edits.iter().filter(|e| !matches!(e, Edit::DeleteLeaf { .. })).cloned().collect();
            self.0.apply(ds, &kept, after.filter(|_| kept.len() == edits.len()))
        }
    }
    let result = sysrepo::run(Test::RemoveAnItem, &mut Forgetful(blob_store()), 20, 2, false, &NoProbe);
    assert!(matches!(result, Err(Error::WrongResult(_))), "{result:?}");
}

#[test]
fn the_stores_survive_a_reopen() {
    // What the canister does after an upgrade: `init` over the same memories.
    let (r, o) = (VectorMemory::default(), VectorMemory::default());
    let mut store = BlobStore::new(r.clone(), o.clone()).unwrap();
    store.apply(Ds::Running, &sysrepo::lst_batch(5), None).unwrap();
    assert_eq!(BlobStore::init(r, o).load(Ds::Running).unwrap().lst.len(), 5);
    let memories: [VectorMemory; 6] = std::array::from_fn(|_| VectorMemory::default());
    let mut store = StableStore::new(memories.clone());
    store
        .apply(Ds::Operational, &[Edit::SetUsr { k: 3, l: "a".into() }, Edit::SetUsr { k: 1, l: "b".into() }], None)
        .unwrap();
    let reopened = StableStore::init(memories).load(Ds::Operational).unwrap();
    assert_eq!(reopened.usr(), &[(3, "a".to_string()), (1, "b".to_string())]);
}
