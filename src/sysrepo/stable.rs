//! The StableBTreeMap diff store: each datastore is three ic-stable-structures maps in stable
//! memory, and an apply writes only the entries the edits touch.
//!
//! `lst`: key `k1` (4 bytes, big-endian, so the map's order is `(k1, k2)`'s) then `k2`'s bytes;
//! value: a tag (0 = no leaf, 1 = leaf), then the leaf's bytes. `usr-lst`: position -> `k` (4 bytes,
//! big-endian) then `l`'s bytes, in user order (ic-stable-structures 0.7 cannot store a tuple
//! with an unbounded member), and `k` -> position (an index, so an edit of an existing item finds its place).
//! Operational `lst` values end with the origin metadata. There are no transactions: a message that
//! traps is discarded whole by the IC, and [`super::validate`] runs before anything is written,
//! so a refused apply writes nothing.

use ic_stable_structures::{Memory, StableBTreeMap};

use super::{validate, Ds, Edit, LstKey, Store, Tree, ORIGIN};
use crate::{Error, Result};

/// The gap between two consecutive `usr-lst` positions.
pub const POSITION_GAP: u64 = 1024;

fn pair_bytes(key: &LstKey) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + key.1.len());
    bytes.extend_from_slice(&key.0.to_be_bytes());
    bytes.extend_from_slice(key.1.as_bytes());
    bytes
}

fn decode_pair(bytes: &[u8]) -> Result<LstKey> {
    let corrupt = || Error::InvalidArgument("a stored lst key is corrupt".into());
    let k1 = u32::from_be_bytes(bytes.get(..4).ok_or_else(corrupt)?.try_into().expect("4 bytes"));
    Ok((k1, String::from_utf8(bytes[4..].to_vec()).map_err(|_| corrupt())?))
}

/// A value: tag, length of the leaf (4 bytes little-endian), the leaf, then the metadata if any.
fn encode(l: Option<&str>, oper: bool) -> Vec<u8> {
    let l = l.map(str::as_bytes);
    let mut bytes = Vec::with_capacity(5 + l.map_or(0, <[u8]>::len) + if oper { ORIGIN.len() } else { 0 });
    bytes.push(u8::from(l.is_some()));
    bytes.extend_from_slice(&(l.map_or(0, <[u8]>::len) as u32).to_le_bytes());
    bytes.extend_from_slice(l.unwrap_or_default());
    if oper {
        bytes.extend_from_slice(ORIGIN.as_bytes());
    }
    bytes
}

fn decode(bytes: &[u8]) -> Result<Option<String>> {
    let corrupt = || Error::InvalidArgument("a stored value is corrupt".into());
    let len = u32::from_le_bytes(bytes.get(1..5).ok_or_else(corrupt)?.try_into().expect("4 bytes")) as usize;
    let leaf = bytes.get(5..5 + len).ok_or_else(corrupt)?;
    Ok(match bytes[0] {
        0 => None,
        _ => Some(String::from_utf8(leaf.to_vec()).map_err(|_| corrupt())?),
    })
}

struct Maps<M: Memory> {
    lst: StableBTreeMap<Vec<u8>, Vec<u8>, M>,
    usr: StableBTreeMap<u64, Vec<u8>, M>,
    usr_index: StableBTreeMap<u32, u64, M>,
}

/// The StableBTreeMap diff store: per datastore, the memories of `lst`, `usr-lst` and its index.
pub struct StableStore<M: Memory> {
    maps: [Maps<M>; 2],
}

impl<M: Memory> StableStore<M> {
    /// The store in these memories (running's three, then operational's three): the maps they
    /// hold, or new empty ones.
    pub fn init(memories: [M; 6]) -> Self {
        let [a, b, c, d, e, f] = memories;
        let maps = |lst, usr, usr_index| Maps {
            lst: StableBTreeMap::init(lst),
            usr: StableBTreeMap::init(usr),
            usr_index: StableBTreeMap::init(usr_index),
        };
        StableStore { maps: [maps(a, b, c), maps(d, e, f)] }
    }

    /// The store in these memories, emptied.
    pub fn new(memories: [M; 6]) -> Self {
        let mut store = Self::init(memories);
        for m in &mut store.maps {
            m.lst.clear_new();
            m.usr.clear_new();
            m.usr_index.clear_new();
        }
        store
    }
}

impl<M: Memory> Store for StableStore<M> {
    fn load(&mut self, ds: Ds) -> Result<Tree> {
        let m = &self.maps[ds.index()];
        let lst = m
            .lst
            .iter()
            .map(|e| {
                let (k, v) = e.into_pair();
                Ok((decode_pair(&k)?, decode(&v)?))
            })
            .collect::<Result<_>>()?;
        let usr = m
            .usr
            .values()
            .map(|v| {
                let (k, l) = decode_pair(&v)?;
                Ok((k, l))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tree::with_usr(lst, usr))
    }

    fn get(&mut self, ds: Ds, key: &LstKey) -> Result<Option<Option<String>>> {
        self.maps[ds.index()].lst.get(&pair_bytes(key)).map(|v| decode(&v)).transpose()
    }

    fn apply(&mut self, ds: Ds, edits: &[Edit], _after: Option<&Tree>) -> Result<()> {
        let oper = ds == Ds::Operational;
        validate(edits, |key| Ok(matches!(self.get(ds, key)?, Some(Some(_)))))?;
        let m = &mut self.maps[ds.index()];
        for edit in edits {
            match edit {
                Edit::Set { key, l } | Edit::Create { key, l } => {
                    m.lst.insert(pair_bytes(key), encode(Some(l), oper));
                }
                Edit::DeleteLeaf { key } => {
                    let k = pair_bytes(key);
                    if m.lst.contains_key(&k) {
                        m.lst.insert(k, encode(None, oper));
                    }
                }
                Edit::DeleteLst => m.lst.clear_new(),
                Edit::DeleteAll => {
                    m.lst.clear_new();
                    m.usr.clear_new();
                    m.usr_index.clear_new();
                }
                Edit::SetUsr { k, l } => {
                    let pos = match m.usr_index.get(k) {
                        Some(pos) => pos,
                        None => {
                            let pos = m.usr.last_key_value().map_or(0, |(p, _)| p) + POSITION_GAP;
                            m.usr_index.insert(*k, pos);
                            pos
                        }
                    };
                    m.usr.insert(pos, pair_bytes(&(*k, l.clone())));
                }
            }
        }
        Ok(())
    }
}
