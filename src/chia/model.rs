//! The oracle: the coin set in two plain `BTreeMap`s, as simple as a [`Schema`] can be, and strict:
//! it refuses every block that breaks the protocol's preconditions (which the real schemas assume
//! without checking), so a test chain that breaks them fails loudly instead of making the schemas
//! disagree in ways that mean nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::hashdb::hex;
use super::{validate_block, BlockSpendInfo, CoinInfo, Hash, Schema};
use crate::{Error, Result};

/// Coins by name and blocks by index, in the heap.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    coins: BTreeMap<Hash, CoinInfo>,
    blocks: BTreeMap<u32, BlockSpendInfo>,
}

impl Model {
    /// An empty coin set.
    pub fn new() -> Self {
        Model::default()
    }

    /// Every coin, by name.
    pub fn coins(&self) -> &BTreeMap<Hash, CoinInfo> {
        &self.coins
    }

    /// Every block, by index, in canonical order.
    pub fn blocks(&self) -> &BTreeMap<u32, BlockSpendInfo> {
        &self.blocks
    }

    /// The highest block index stored.
    pub fn tip(&self) -> Option<u32> {
        self.blocks.keys().next_back().copied()
    }

    /// Checks every precondition of [`Schema::accept_block`] against the current state.
    fn check(&self, block: &BlockSpendInfo) -> Result<()> {
        let refuse = |what: String| Err(Error::InvalidArgument(format!("chia block {}: {what}", block.index)));
        validate_block(block)?;
        if let Some(tip) = self.tip() {
            if block.index <= tip {
                return refuse(format!("index not above the tip {tip}"));
            }
        }
        let mut created = BTreeSet::new();
        for coin in &block.confirms {
            let name = coin.name();
            if self.coins.contains_key(&name) || !created.insert(name) {
                return refuse(format!("coin {} is created twice", hex(&name)));
            }
        }
        for coin in &block.confirms {
            if !coin.is_coinbase() && !self.coins.contains_key(&coin.parent) && !created.contains(&coin.parent) {
                return refuse(format!("parent {} is no coin and no reward parent", hex(&coin.parent)));
            }
        }
        let mut spent = BTreeSet::new();
        for name in &block.spends {
            if !spent.insert(name) {
                return refuse(format!("coin {} is spent twice", hex(name)));
            }
            match self.coins.get(name) {
                Some(info) if info.spent_index.is_some() => {
                    return refuse(format!("coin {} was already spent", hex(name)))
                }
                Some(_) => {}
                None if created.contains(name) => {}
                None => return refuse(format!("spends the unknown coin {}", hex(name))),
            }
        }
        Ok(())
    }
}

impl Schema for Model {
    /// Refuses a block that breaks a precondition (see [`Schema`]), changing nothing.
    fn accept_block(&mut self, block: &BlockSpendInfo) -> Result<()> {
        self.check(block)?;
        for coin in &block.confirms {
            let info =
                CoinInfo { coin: *coin, confirmed_index: block.index, spent_index: None, coinbase: coin.is_coinbase() };
            self.coins.insert(coin.name(), info);
        }
        for name in &block.spends {
            self.coins.get_mut(name).expect("checked").spent_index = Some(block.index);
        }
        self.blocks.insert(block.index, block.clone().canonical());
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn coin_infos_for_coin_names(&mut self, names: &[Hash]) -> Result<Vec<CoinInfo>> {
        Ok(names.iter().filter_map(|n| self.coins.get(n).copied()).collect())
    }

    fn block_info_for_block_index(&mut self, index: u32) -> Result<Option<BlockSpendInfo>> {
        Ok(self.blocks.get(&index).cloned())
    }

    fn rewind_to_block_index(&mut self, index: u32) -> Result<()> {
        self.coins.retain(|_, info| info.confirmed_index <= index);
        for info in self.coins.values_mut() {
            if info.spent_index.is_some_and(|s| s > index) {
                info.spent_index = None;
            }
        }
        self.blocks.retain(|&i, _| i <= index);
        Ok(())
    }
}
