//! Everything in `StableBTreeMap`s (an extra, not in the original): coins by name and blocks by
//! index, each map in its own `Memory`, no SQLite.
//!
//! - coins: `StableBTreeMap<[u8; 32], StoredCoin>`, the name → the [`CoinInfo`] in 81 bytes
//!   (parent, puzzle hash, amount u64 BE, confirmed index u32 BE, spent index u32 BE with 0 for
//!   unspent, coinbase flag);
//! - blocks: `StableBTreeMap<u32, StoredBlock>`, the index → the block as accepted in canonical
//!   order: index u32 BE, timestamp u64 BE, spend and confirm counts u32 BE, the spends' names, the confirms as
//!   parent ‖ puzzle hash ‖ amount u64 BE (72 bytes each).
//!
//! This is v2 with a B-tree of ic-stable-structures instead of SQLite's: the same random 32-byte
//! key per coin, but no SQL layer, no pages of SQLite's cache and no journal.
//!
//! - [`Schema::accept_block`]: one `insert` per created coin (spent already if the block spends it
//!   too), a `get` and an `insert` per other spend, one `insert` of the block. No transaction and
//!   none needed: on the IC a message that traps is discarded whole, stable memory included.
//! - [`Schema::flush`] does nothing.
//! - [`Schema::coin_infos_for_coin_names`]: one `get` per name.
//! - [`Schema::block_info_for_block_index`]: one `get`.
//! - [`Schema::rewind_to_block_index`]: the dropped blocks, newest first: `remove` their coins,
//!   mark their spends unspent (`get`, `insert`), `remove` the block. No scan.

use std::borrow::Cow;
use std::collections::BTreeSet;

use ic_stable_structures::storable::Bound;
use ic_stable_structures::{Memory, StableBTreeMap, Storable};

use super::{validate_block, BlockSpendInfo, Coin, CoinInfo, Hash, Schema};
use crate::Result;

/// The schema: coins by name, blocks by index.
pub struct BtreeAll<M: Memory> {
    coins: StableBTreeMap<Hash, StoredCoin, M>,
    blocks: StableBTreeMap<u32, StoredBlock, M>,
}

impl<M: Memory> BtreeAll<M> {
    /// Opens the maps in `coins_memory` and `blocks_memory` as they are, or starts empty ones if
    /// the memories are empty.
    pub fn init(coins_memory: M, blocks_memory: M) -> Self {
        BtreeAll { coins: StableBTreeMap::init(coins_memory), blocks: StableBTreeMap::init(blocks_memory) }
    }

    /// Coins stored.
    pub fn coin_count(&self) -> u64 {
        self.coins.len()
    }

    /// Blocks stored.
    pub fn block_count(&self) -> u64 {
        self.blocks.len()
    }
}

impl<M: Memory> Schema for BtreeAll<M> {
    fn accept_block(&mut self, block: &BlockSpendInfo) -> Result<()> {
        validate_block(block)?;
        let spends: BTreeSet<&Hash> = block.spends.iter().collect();
        let mut created = BTreeSet::new();
        for coin in &block.confirms {
            let name = coin.name();
            let spent_index = spends.contains(&name).then_some(block.index);
            let info =
                CoinInfo { coin: *coin, confirmed_index: block.index, spent_index, coinbase: coin.is_coinbase() };
            self.coins.insert(name, StoredCoin(info));
            created.insert(name);
        }
        for name in &block.spends {
            if created.contains(name) {
                continue;
            }
            // A spend of an unknown coin changes nothing (as v2's UPDATE).
            if let Some(StoredCoin(mut info)) = self.coins.get(name) {
                info.spent_index = Some(block.index);
                self.coins.insert(*name, StoredCoin(info));
            }
        }
        self.blocks.insert(block.index, StoredBlock(block.clone().canonical()));
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn coin_infos_for_coin_names(&mut self, names: &[Hash]) -> Result<Vec<CoinInfo>> {
        Ok(names.iter().filter_map(|n| self.coins.get(n)).map(|c| c.0).collect())
    }

    fn block_info_for_block_index(&mut self, index: u32) -> Result<Option<BlockSpendInfo>> {
        Ok(self.blocks.get(&index).map(|b| b.0))
    }

    fn rewind_to_block_index(&mut self, index: u32) -> Result<()> {
        let Some(first) = index.checked_add(1) else { return Ok(()) };
        let dropped: Vec<u32> = self.blocks.keys_range(first..).collect();
        for i in dropped.into_iter().rev() {
            let StoredBlock(block) = self.blocks.remove(&i).expect("a key just listed");
            for coin in &block.confirms {
                self.coins.remove(&coin.name());
            }
            for name in &block.spends {
                if let Some(StoredCoin(mut info)) = self.coins.get(name) {
                    info.spent_index = None;
                    self.coins.insert(*name, StoredCoin(info));
                }
            }
        }
        Ok(())
    }
}

/// A [`CoinInfo`] as the coin map stores it (81 bytes, see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredCoin(pub CoinInfo);

const COIN_LEN: usize = 32 + 32 + 8 + 4 + 4 + 1;

impl Storable for StoredCoin {
    fn to_bytes(&self) -> Cow<'_, [u8]> {
        let c = &self.0;
        let mut b = Vec::with_capacity(COIN_LEN);
        b.extend_from_slice(&c.coin.parent);
        b.extend_from_slice(&c.coin.puzzle_hash);
        b.extend_from_slice(&c.coin.amount.to_be_bytes());
        b.extend_from_slice(&c.confirmed_index.to_be_bytes());
        b.extend_from_slice(&c.spent_index.unwrap_or(0).to_be_bytes());
        b.push(u8::from(c.coinbase));
        Cow::Owned(b)
    }

    fn into_bytes(self) -> Vec<u8> {
        self.to_bytes().into_owned()
    }

    fn from_bytes(bytes: Cow<[u8]>) -> Self {
        let b = bytes.as_ref();
        let spent = u32::from_be_bytes(b[76..80].try_into().expect("4 bytes"));
        StoredCoin(CoinInfo {
            coin: Coin {
                parent: b[..32].try_into().expect("32 bytes"),
                puzzle_hash: b[32..64].try_into().expect("32 bytes"),
                amount: u64::from_be_bytes(b[64..72].try_into().expect("8 bytes")),
            },
            confirmed_index: u32::from_be_bytes(b[72..76].try_into().expect("4 bytes")),
            spent_index: (spent != 0).then_some(spent),
            coinbase: b[80] != 0,
        })
    }

    const BOUND: Bound = Bound::Bounded { max_size: COIN_LEN as u32, is_fixed_size: true };
}

/// A block as the block map stores it (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBlock(pub BlockSpendInfo);

impl Storable for StoredBlock {
    fn to_bytes(&self) -> Cow<'_, [u8]> {
        let block = &self.0;
        let mut b = Vec::with_capacity(20 + 32 * block.spends.len() + 72 * block.confirms.len());
        b.extend_from_slice(&block.index.to_be_bytes());
        b.extend_from_slice(&block.timestamp.to_be_bytes());
        b.extend_from_slice(&(block.spends.len() as u32).to_be_bytes());
        b.extend_from_slice(&(block.confirms.len() as u32).to_be_bytes());
        for s in &block.spends {
            b.extend_from_slice(s);
        }
        for c in &block.confirms {
            b.extend_from_slice(&c.parent);
            b.extend_from_slice(&c.puzzle_hash);
            b.extend_from_slice(&c.amount.to_be_bytes());
        }
        Cow::Owned(b)
    }

    fn into_bytes(self) -> Vec<u8> {
        self.to_bytes().into_owned()
    }

    fn from_bytes(bytes: Cow<[u8]>) -> Self {
        let b = bytes.as_ref();
        let index = u32::from_be_bytes(b[..4].try_into().expect("4 bytes"));
        let b = &b[4..];
        let timestamp = u64::from_be_bytes(b[..8].try_into().expect("8 bytes"));
        let spend_count = u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")) as usize;
        let confirm_count = u32::from_be_bytes(b[12..16].try_into().expect("4 bytes")) as usize;
        let spends_end = 16 + 32 * spend_count;
        let spends = b[16..spends_end].chunks_exact(32).map(|s| s.try_into().expect("32 bytes")).collect();
        let confirms = b[spends_end..spends_end + 72 * confirm_count]
            .chunks_exact(72)
            .map(|c| Coin {
                parent: c[..32].try_into().expect("32 bytes"),
                puzzle_hash: c[32..64].try_into().expect("32 bytes"),
                amount: u64::from_be_bytes(c[64..].try_into().expect("8 bytes")),
            })
            .collect();
        StoredBlock(BlockSpendInfo { index, timestamp, spends, confirms })
    }

    const BOUND: Bound = Bound::Unbounded;
}
