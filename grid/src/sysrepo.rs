//! sysrepo's datastore-plugin performance test (`sr_perf`, `tests/perf.c` of sysrepo/sysrepo,
//! published in its `DB_PLG_PERF.md`) as grid data: the 22 tests in the document's order, the
//! sizes and the number of tries. The library (`stablebench::sysrepo`) runs them.

/// One of sysrepo's 22 performance tests, in `DB_PLG_PERF.md`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Test {
    /// `sr_get_data` on `lst[k1='N/2' and k2='strN/2']/l`: not a key path, so the whole
    /// datastore is loaded and filtered.
    GetTree,
    /// `sr_get_item` on the same path: one value, the whole datastore loaded.
    GetItem,
    /// `sr_get_data` on the key path `lst[k1='N/2'][k2='strN/2']/l`: one item looked up.
    GetTreeHash,
    /// As [`Test::GetTreeHash`], from the running-datastore cache.
    GetTreeHashCached,
    /// `sr_get_data("/perf:cont")` with N items in the user-ordered list, in user order.
    GetUserOrderedTree,
    /// `sr_get_data("/perf:cont")` on operational data a callback builds (N items, nothing
    /// stored): the control, the same for every backend.
    GetOperTree,
    /// The N-item tree built and applied as one batch (deleted again outside the timer).
    CreateBatch,
    /// N `sr_set_item_str` on the user-ordered list, one apply.
    CreateUserOrderedItems,
    /// N `sr_set_item_str` on `lst`, one apply.
    CreateAllItems,
    /// As [`Test::CreateAllItems`], in the operational datastore (items carry metadata).
    CreateAllItemsOper,
    /// 12 subscribers to changes of the operational datastore; 10 rounds of (N sets + apply;
    /// delete `lst` + apply), every apply notifying every subscriber.
    ManyOperChangeSubs,
    /// Delete `/perf:cont/lst` + apply. Quirk: setup runs once, so only try 1 deletes anything.
    RemoveAllItems,
    /// As [`Test::RemoveAllItems`], cached.
    RemoveAllItemsCached,
    /// Delete `/perf:cont` + apply. Same quirk.
    RemoveWholeSubtree,
    /// As [`Test::RemoveWholeSubtree`], cached.
    RemoveWholeSubtreeCached,
    /// Outside the timer: delete item N/2's leaf + apply; timed: create it (strict) + apply.
    CreateAnItem,
    /// As [`Test::CreateAnItem`], cached.
    CreateAnItemCached,
    /// As [`Test::CreateAnItem`] on N operational items, not strict.
    CreateAnItemOper,
    /// Set item N/2's leaf to "l1" + apply. Quirk: tries 2-10 write the value it already has.
    ModifyAnItem,
    /// As [`Test::ModifyAnItem`], cached.
    ModifyAnItemCached,
    /// Delete item N/2's leaf + apply. Quirk: tries 2-10 delete a leaf that is already gone.
    RemoveAnItem,
    /// As [`Test::RemoveAnItem`], cached.
    RemoveAnItemCached,
}

/// What a test's setup writes before its first try ([`Test::setup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setup {
    /// Nothing: the tries start from empty datastores.
    Nothing,
    /// The N items of `lst` in the running datastore, as one batch.
    Items,
    /// The N items of `lst` in the operational datastore, as one batch.
    OperationalItems,
    /// The N items of the user-ordered list in the running datastore, as one batch.
    UserOrderedItems,
}

impl Setup {
    /// Its name in setup stage keys.
    pub const fn name(self) -> &'static str {
        match self {
            Setup::Nothing => "nothing",
            Setup::Items => "items",
            Setup::OperationalItems => "operational_items",
            Setup::UserOrderedItems => "user_ordered_items",
        }
    }
}

/// The 22 tests in `DB_PLG_PERF.md`'s order (the report's row order).
pub const TESTS: [Test; 22] = [
    Test::GetTree,
    Test::GetItem,
    Test::GetTreeHash,
    Test::GetTreeHashCached,
    Test::GetUserOrderedTree,
    Test::GetOperTree,
    Test::CreateBatch,
    Test::CreateUserOrderedItems,
    Test::CreateAllItems,
    Test::CreateAllItemsOper,
    Test::ManyOperChangeSubs,
    Test::RemoveAllItems,
    Test::RemoveAllItemsCached,
    Test::RemoveWholeSubtree,
    Test::RemoveWholeSubtreeCached,
    Test::CreateAnItem,
    Test::CreateAnItemCached,
    Test::CreateAnItemOper,
    Test::ModifyAnItem,
    Test::ModifyAnItemCached,
    Test::RemoveAnItem,
    Test::RemoveAnItemCached,
];

/// The data set sizes `DB_PLG_PERF.md` reports (`sr_perf 1000 10`, `10000 10`, `100000 10`).
pub const SIZES: [u64; 3] = [1_000, 10_000, 100_000];

/// Tries per test (`sr_perf`'s second argument in the document): the reported value is the mean.
pub const TRIES: u32 = 10;

/// The canbench scope holding a sysrepo cell's most expensive try (`calls` = 1): what must fit
/// one production message (try 1 of a setup-once test can cost far more than the mean).
pub const MAX_TRY_SCOPE: &str = "max_try";

/// The largest size whose cells the benchmark canister's live API runs: setup and ten tries are
/// one update call, which at 10,000 items and more can exceed its 40 B instructions.
pub const LIVE_MAX_SIZE: u64 = 1_000;

/// Rounds of "many oper change_subs" per try (perf.c's loop).
pub const CHANGE_SUB_ROUNDS: u32 = 10;

/// Subscribers of "many oper change_subs" (perf.c's 12 extra connections).
pub const CHANGE_SUBSCRIBERS: usize = 12;

/// The largest size "many oper change_subs" runs at. At 100,000 items one try is 20 applies of
/// 100,000 edits: about 28 B instructions per try with SQLite (linear from 10,000), and more than
/// the 40 B update limit with `StableBTreeMap` (9.1 B per try at 10,000, growing faster than
/// linearly); its ten tries would add minutes to every CI run. The report says it was not run.
pub const CHANGE_SUBS_MAX_SIZE: u64 = 10_000;

impl Test {
    /// The name in benchmark names (`get_tree_hash_cached`).
    pub const fn name(self) -> &'static str {
        match self {
            Test::GetTree => "get_tree",
            Test::GetItem => "get_item",
            Test::GetTreeHash => "get_tree_hash",
            Test::GetTreeHashCached => "get_tree_hash_cached",
            Test::GetUserOrderedTree => "get_user_ordered_tree",
            Test::GetOperTree => "get_oper_tree",
            Test::CreateBatch => "create_batch",
            Test::CreateUserOrderedItems => "create_user_ordered_items",
            Test::CreateAllItems => "create_all_items",
            Test::CreateAllItemsOper => "create_all_items_oper",
            Test::ManyOperChangeSubs => "many_oper_change_subs",
            Test::RemoveAllItems => "remove_all_items",
            Test::RemoveAllItemsCached => "remove_all_items_cached",
            Test::RemoveWholeSubtree => "remove_whole_subtree",
            Test::RemoveWholeSubtreeCached => "remove_whole_subtree_cached",
            Test::CreateAnItem => "create_an_item",
            Test::CreateAnItemCached => "create_an_item_cached",
            Test::CreateAnItemOper => "create_an_item_oper",
            Test::ModifyAnItem => "modify_an_item",
            Test::ModifyAnItemCached => "modify_an_item_cached",
            Test::RemoveAnItem => "remove_an_item",
            Test::RemoveAnItemCached => "remove_an_item_cached",
        }
    }

    /// The test's name as `DB_PLG_PERF.md` prints it ("get tree hash cached").
    pub const fn title(self) -> &'static str {
        match self {
            Test::GetTree => "get tree",
            Test::GetItem => "get item",
            Test::GetTreeHash => "get tree hash",
            Test::GetTreeHashCached => "get tree hash cached",
            Test::GetUserOrderedTree => "get user ordered tree",
            Test::GetOperTree => "get oper tree",
            Test::CreateBatch => "create batch",
            Test::CreateUserOrderedItems => "create user ordered items",
            Test::CreateAllItems => "create all items",
            Test::CreateAllItemsOper => "create all items oper",
            Test::ManyOperChangeSubs => "many oper change_subs",
            Test::RemoveAllItems => "remove all items",
            Test::RemoveAllItemsCached => "remove all items cached",
            Test::RemoveWholeSubtree => "remove whole subtree",
            Test::RemoveWholeSubtreeCached => "remove whole subtree cached",
            Test::CreateAnItem => "create an item",
            Test::CreateAnItemCached => "create an item cached",
            Test::CreateAnItemOper => "create an item oper",
            Test::ModifyAnItem => "modify an item",
            Test::ModifyAnItemCached => "modify an item cached",
            Test::RemoveAnItem => "remove an item",
            Test::RemoveAnItemCached => "remove an item cached",
        }
    }

    /// Whether the test runs on a cached connection (the running datastore kept decoded in the
    /// heap).
    pub const fn cached(self) -> bool {
        matches!(
            self,
            Test::GetTreeHashCached
                | Test::RemoveAllItemsCached
                | Test::RemoveWholeSubtreeCached
                | Test::CreateAnItemCached
                | Test::ModifyAnItemCached
                | Test::RemoveAnItemCached
        )
    }

    /// What the test's setup writes before its first try (never timed). Tests with the same
    /// setup start their tries from the same store, so their cells share it (a setup stage).
    pub const fn setup(self) -> Setup {
        match self {
            Test::GetUserOrderedTree => Setup::UserOrderedItems,
            Test::CreateAnItemOper => Setup::OperationalItems,
            Test::GetOperTree
            | Test::CreateBatch
            | Test::CreateUserOrderedItems
            | Test::CreateAllItems
            | Test::CreateAllItemsOper
            | Test::ManyOperChangeSubs => Setup::Nothing,
            _ => Setup::Items,
        }
    }

    /// Whether sysrepo's setup-once harness hides the real cost after try 1 (see the variants'
    /// docs): these also run fresh, with the setup repeated before every try.
    pub const fn has_quirk(self) -> bool {
        matches!(
            self,
            Test::RemoveAllItems
                | Test::RemoveAllItemsCached
                | Test::RemoveWholeSubtree
                | Test::RemoveWholeSubtreeCached
                | Test::ModifyAnItem
                | Test::ModifyAnItemCached
                | Test::RemoveAnItem
                | Test::RemoveAnItemCached
        )
    }

    /// Whether the timed part only reads (a production canister would run it as a query, under
    /// the 5 B limit).
    pub const fn reads(self) -> bool {
        matches!(
            self,
            Test::GetTree
                | Test::GetItem
                | Test::GetTreeHash
                | Test::GetTreeHashCached
                | Test::GetUserOrderedTree
                | Test::GetOperTree
        )
    }

    /// Whether the test runs at `size` (see [`CHANGE_SUBS_MAX_SIZE`]).
    pub const fn runs_at(self, size: u64) -> bool {
        !matches!(self, Test::ManyOperChangeSubs) || size <= CHANGE_SUBS_MAX_SIZE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_are_in_the_documents_order_with_unique_names() {
        assert_eq!(TESTS.len(), 22);
        let mut names: Vec<_> = TESTS.iter().map(|t| t.name()).collect();
        assert_eq!(names[0], "get_tree");
        assert_eq!(names[10], "many_oper_change_subs");
        assert_eq!(names[21], "remove_an_item_cached");
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 22);
        for t in TESTS {
            assert_eq!(t.title().replace(' ', "_"), t.name(), "{t:?}");
            assert_eq!(t.cached(), t.name().ends_with("_cached"), "{t:?}");
        }
        assert_eq!(TESTS.iter().filter(|t| t.has_quirk()).count(), 8);
    }
}
