//! A deterministic synthetic chain: the stand-in for the original's replay file.
//!
//! The original replays mainnet's first blocks below height 800,000, dumped from a full node's
//! database (`cdb/cmds/dump_blocks.py`): a 2.1 GB file with 13,423,068 coin creations and
//! 5,840,449 spends. Neither the file nor the node's database can be shipped to a canister, so the
//! benchmark generates a chain with the same shape from a seed:
//!
//! - block indices increase by a random gap of 1 to 4 (the dump skips blocks that create no coin,
//!   and most of Chia's blocks are not transaction blocks), starting at 1; timestamps increase by
//!   10 to 60 seconds per index step;
//! - every block creates 2 reward coins whose parents are the synthetic reward parents of its
//!   height ([`super::reward_parent`], one per prefix), and `k` transaction coins, `k` uniform on
//!   `0..=16`, each the child of one of the coins the block spends (so a block that spends nothing
//!   creates no transaction coin);
//! - a block spends `s` coins drawn uniformly from the unspent set (a `Vec`, removing by
//!   `swap_remove`), `s` the probabilistic rounding of [`SPEND_RATIO`] × (the block's new coins),
//!   capped by the number of unspent coins, so that spends / creations over the chain is the
//!   original's 5,840,449 / 13,423,068 ≈ 0.435;
//! - puzzle hashes are random; amounts are random numbers of 0 to 8 bytes (uniform length), so the
//!   coin names hash CLVM integers of every length, 0 (empty) and 9 bytes included.
//!
//! Blocks come out as the replay file has them: spends sorted by name, confirms sorted by (parent,
//! puzzle hash, amount). The chain stops after exactly [`ChainSpec::coins`] creations (the last
//! block is cut short if needed).
//!
//! What it does not model: coins created and spent in the same block ("ephemeral" coins) and
//! children of such coins, which mainnet has; the hash-db schemas' topological sort is exercised by
//! the tests with hand-made blocks instead. The randomness is a ChaCha8 stream, as everywhere in
//! the crate: no OS randomness, the same bytes natively and in wasm.

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{reward_parent, BlockSpendInfo, Coin, Hash};
use crate::kv::gen::uniform;

/// Spends per creation, as a fraction: the original replay file's 5,840,449 spends over 13,423,068
/// creations (≈ 0.4351).
pub const SPEND_RATIO: (u64, u64) = (5_840_449, 13_423_068);

/// Reward coins per block (a pool and a farmer reward).
pub const REWARDS_PER_BLOCK: u64 = 2;

/// The largest number of transaction coins in a block (`k` is uniform on `0..=MAX_TX_COINS`).
pub const MAX_TX_COINS: u64 = 16;

/// The timestamp of the block before the first (Chia mainnet's launch, 2021-03-19).
pub const GENESIS_TIMESTAMP: u64 = 1_616_162_400;

/// The ChaCha key's domain bytes, so the chain's stream differs from every other generator's under
/// the same seed.
const DOMAIN: [u8; 8] = *b"chiachn1";

/// Which chain to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChainSpec {
    /// Coins to create in all; the chain ends after exactly this many.
    pub coins: u64,
    /// The seed of the random stream.
    pub seed: u64,
}

/// The chain of a [`ChainSpec`], block by block.
pub fn chain(spec: ChainSpec) -> Chain {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&spec.seed.to_le_bytes());
    key[8..16].copy_from_slice(&DOMAIN);
    Chain {
        spec,
        rng: ChaCha8Rng::from_seed(key),
        unspent: Vec::new(),
        created: 0,
        spent: 0,
        index: 0,
        timestamp: GENESIS_TIMESTAMP,
    }
}

/// The iterator [`chain`] returns. It keeps the unspent set (32 bytes per unspent coin, about
/// 56 % of the coins created so far).
#[derive(Clone, Debug)]
pub struct Chain {
    spec: ChainSpec,
    rng: ChaCha8Rng,
    unspent: Vec<Hash>,
    created: u64,
    spent: u64,
    index: u32,
    timestamp: u64,
}

impl Chain {
    /// Coins created by the blocks returned so far.
    pub fn created(&self) -> u64 {
        self.created
    }

    /// Coins spent by the blocks returned so far.
    pub fn spent(&self) -> u64 {
        self.spent
    }

    /// The names of the coins left unspent by the blocks returned so far, in no particular order.
    pub fn unspent(&self) -> &[Hash] {
        &self.unspent
    }

    fn random_hash(&mut self) -> Hash {
        let mut h = [0u8; 32];
        self.rng.fill_bytes(&mut h);
        h
    }

    /// A random amount of 0 to 8 bytes (uniform length, then uniform value of that length).
    fn random_amount(&mut self) -> u64 {
        let bytes = uniform(&mut self.rng, 0, 8);
        let word = self.rng.next_u64();
        if bytes == 0 {
            0
        } else {
            word >> (64 - 8 * bytes)
        }
    }
}

impl Iterator for Chain {
    type Item = BlockSpendInfo;

    fn next(&mut self) -> Option<BlockSpendInfo> {
        let remaining = self.spec.coins - self.created;
        if remaining == 0 {
            return None;
        }
        let gap = uniform(&mut self.rng, 1, 4);
        self.index = self.index.checked_add(gap as u32).expect("the chain outgrew u32 block indices");
        for _ in 0..gap {
            self.timestamp += uniform(&mut self.rng, 10, 60);
        }
        let rewards = REWARDS_PER_BLOCK.min(remaining);
        let mut tx = uniform(&mut self.rng, 0, MAX_TX_COINS).min(remaining - rewards);
        // Probabilistic rounding of SPEND_RATIO × new coins: the integer part, plus one with the
        // fractional part's probability (integers only, so native and wasm agree bit for bit).
        let (num, den) = SPEND_RATIO;
        let scaled = num * (rewards + tx);
        let mut spends = scaled / den + u64::from(uniform(&mut self.rng, 0, den - 1) < scaled % den);
        spends = spends.min(self.unspent.len() as u64);
        if spends == 0 {
            tx = 0;
        }
        let mut spent: Vec<Hash> = (0..spends)
            .map(|_| {
                let at = uniform(&mut self.rng, 0, self.unspent.len() as u64 - 1) as usize;
                self.unspent.swap_remove(at)
            })
            .collect();
        let mut confirms = Vec::with_capacity((rewards + tx) as usize);
        for prefix in 0..rewards as usize {
            let parent = reward_parent(prefix, u64::from(self.index));
            let puzzle_hash = self.random_hash();
            confirms.push(Coin { parent, puzzle_hash, amount: self.random_amount() });
        }
        for _ in 0..tx {
            let parent = spent[uniform(&mut self.rng, 0, spends - 1) as usize];
            let puzzle_hash = self.random_hash();
            confirms.push(Coin { parent, puzzle_hash, amount: self.random_amount() });
        }
        spent.sort_unstable();
        confirms.sort_unstable();
        self.unspent.extend(confirms.iter().map(Coin::name));
        self.created += confirms.len() as u64;
        self.spent += spends;
        Some(BlockSpendInfo { index: self.index, timestamp: self.timestamp, spends: spent, confirms })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_creates_exactly_the_coins_asked_for() {
        for coins in [0, 1, 2, 3, 17, 18, 19, 1000] {
            let blocks: Vec<BlockSpendInfo> = chain(ChainSpec { coins, seed: 5 }).collect();
            assert_eq!(blocks.iter().map(|b| b.confirms.len() as u64).sum::<u64>(), coins);
            assert!(blocks.iter().all(|b| !b.confirms.is_empty()));
        }
    }

    #[test]
    fn the_first_block_spends_nothing_and_has_only_rewards() {
        let first = chain(ChainSpec { coins: 100, seed: 1 }).next().unwrap();
        assert!(first.spends.is_empty());
        assert_eq!(first.confirms.len(), 2);
        assert!(first.confirms.iter().all(Coin::is_coinbase));
        assert!((1..=4).contains(&first.index));
    }
}
