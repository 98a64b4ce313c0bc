//! The whole-datastore store: each datastore is one JSON document in stable memory, loaded and
//! parsed whole for every read, serialized and written whole for every change (sysrepo's default
//! "JSON DS file" plugin; the baseline of the report). A cached session writes its decoded copy
//! instead of loading, as sysrepo's cached connection does.
//!
//! The document has libyang's JSON shape: `{"perf:cont":{"lst":[{"k1":0,"k2":"str0","l":"l0"},
//! ...],"usr-lst":[{"k":0,"l":"l0"}, ...]}}`; operational items carry their origin as libyang
//! metadata (`"@":{"ietf-origin:origin":"ietf-origin:learned"}`). In memory: the document's length
//! (8 bytes, little-endian), then the document.

use std::borrow::Cow;

use ic_stable_structures::Memory;
use serde::{Deserialize, Serialize};

use super::{Ds, Edit, LstKey, Store, Tree, ORIGIN};
use crate::{Error, Result};

const WASM_PAGE: u64 = stablebench_grid::ic::WASM_PAGE_BYTES;

#[derive(Serialize, Deserialize, Default)]
struct Doc<'a> {
    #[serde(rename = "perf:cont", default, skip_serializing_if = "Option::is_none")]
    cont: Option<Cont<'a>>,
}

#[derive(Serialize, Deserialize, Default)]
struct Cont<'a> {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    lst: Vec<LstItem<'a>>,
    #[serde(rename = "usr-lst", default, skip_serializing_if = "Vec::is_empty")]
    usr_lst: Vec<UsrItem<'a>>,
}

#[derive(Serialize, Deserialize)]
struct LstItem<'a> {
    k1: u32,
    k2: Cow<'a, str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    l: Option<Cow<'a, str>>,
    #[serde(rename = "@", default, skip_serializing_if = "Option::is_none")]
    meta: Option<Meta<'a>>,
}

#[derive(Serialize, Deserialize)]
struct UsrItem<'a> {
    k: u32,
    l: Cow<'a, str>,
    #[serde(rename = "@", default, skip_serializing_if = "Option::is_none")]
    meta: Option<Meta<'a>>,
}

#[derive(Serialize, Deserialize)]
struct Meta<'a> {
    #[serde(rename = "ietf-origin:origin")]
    origin: Cow<'a, str>,
}

/// `tree` as the JSON document of datastore `ds`.
pub fn to_json(tree: &Tree, ds: Ds) -> Vec<u8> {
    let meta = || (ds == Ds::Operational).then_some(Meta { origin: Cow::Borrowed(ORIGIN) });
    let doc = Doc {
        cont: (!tree.is_empty()).then(|| Cont {
            lst: tree
                .lst
                .iter()
                .map(|((k1, k2), l)| LstItem {
                    k1: *k1,
                    k2: Cow::Borrowed(k2),
                    l: l.as_deref().map(Cow::Borrowed),
                    meta: meta(),
                })
                .collect(),
            usr_lst: tree.usr().iter().map(|(k, l)| UsrItem { k: *k, l: Cow::Borrowed(l), meta: meta() }).collect(),
        }),
    };
    serde_json::to_vec(&doc).expect("a tree always serializes")
}

/// Parses a JSON document [`to_json`] wrote.
pub fn from_json(bytes: &[u8]) -> Result<Tree> {
    if bytes.is_empty() {
        return Ok(Tree::default());
    }
    let doc: Doc = serde_json::from_slice(bytes)
        .map_err(|e| Error::InvalidArgument(format!("the stored datastore is not valid JSON: {e}")))?;
    let cont = doc.cont.unwrap_or_default();
    let lst = cont.lst.into_iter().map(|i| ((i.k1, i.k2.into_owned()), i.l.map(Cow::into_owned))).collect();
    Ok(Tree::with_usr(lst, cont.usr_lst.into_iter().map(|i| (i.k, i.l.into_owned()))))
}

/// The whole-datastore store over two memories (running, operational).
pub struct BlobStore<M: Memory> {
    memories: [M; 2],
}

impl<M: Memory> BlobStore<M> {
    /// The store in these memories: what they hold (an empty memory is an empty datastore).
    pub fn init(running: M, operational: M) -> Self {
        BlobStore { memories: [running, operational] }
    }

    /// The store in these memories, emptied.
    pub fn new(running: M, operational: M) -> Result<Self> {
        let store = Self::init(running, operational);
        for ds in Ds::ALL {
            store.write(ds, &[])?;
        }
        Ok(store)
    }

    /// The stored document of `ds`.
    pub fn read(&self, ds: Ds) -> Vec<u8> {
        let memory = &self.memories[ds.index()];
        if memory.size() == 0 {
            return Vec::new();
        }
        let mut len = [0u8; 8];
        memory.read(0, &mut len);
        let mut bytes = vec![0u8; u64::from_le_bytes(len) as usize];
        memory.read(8, &mut bytes);
        bytes
    }

    fn write(&self, ds: Ds, bytes: &[u8]) -> Result<()> {
        let memory = &self.memories[ds.index()];
        let needed = (8 + bytes.len() as u64).div_ceil(WASM_PAGE);
        if memory.size() < needed && memory.grow(needed - memory.size()) < 0 {
            return Err(Error::InvalidArgument(format!(
                "stable memory is full: the {ds:?} datastore needs {needed} pages"
            )));
        }
        memory.write(8, bytes);
        memory.write(0, &(bytes.len() as u64).to_le_bytes());
        Ok(())
    }
}

impl<M: Memory> Store for BlobStore<M> {
    fn load(&mut self, ds: Ds) -> Result<Tree> {
        from_json(&self.read(ds))
    }

    fn get(&mut self, ds: Ds, key: &LstKey) -> Result<Option<Option<String>>> {
        Ok(self.load(ds)?.lst.remove(key))
    }

    fn apply(&mut self, ds: Ds, edits: &[Edit], after: Option<&Tree>) -> Result<()> {
        match after {
            Some(tree) => self.write(ds, &to_json(tree, ds)),
            None => {
                let mut tree = self.load(ds)?;
                match tree.apply(edits)? {
                    // An empty diff: sysrepo stores nothing.
                    false => Ok(()),
                    true => self.write(ds, &to_json(&tree, ds)),
                }
            }
        }
    }
}
