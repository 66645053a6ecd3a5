//! The Bloom filter: an m-bit array and k hash functions. Insert sets k bits; a query answers
//! "definitely absent" if any of its k bits is 0, else "maybe present". Never a false negative.

use crate::bits::BitArray;
use crate::error::Result;
use crate::params;
#[cfg(target_arch = "x86_64")]
use crate::hashing::{block_avx2, block_avx512};
#[cfg(target_arch = "x86_64")]
use crate::hashing::block_kernel::test_runs;
use crate::hashing::native::NativePositions;
#[cfg(target_arch = "x86_64")]
use crate::hashing::{hadoop_rows::HadoopRows, spark_murmur3_x8::SparkPairs, HadoopHash};
use crate::hashing::{BlockKernel, BlockProbe, KeyHash, Lookup2Pair, Lookup3Pair, PairHash, Pairs, Positions, Scheme, GROUP};
use crate::records::KeyForm;
use crate::spec::{FilterSpec, Layout, BLOCK_BITS};

/// Keys whose cache lines are prefetched together by batched queries and inserts: enough that
/// the first key's line has arrived by the time the last key's prefetch is issued.
pub const BATCH: usize = crate::hashing::GROUP;

/// A plain Bloom filter with its identity and the bookkeeping that `info` reports.
#[derive(Clone, Debug, PartialEq)]
pub struct BloomFilter {
    spec: FilterSpec,
    bits: BitArray,
    /// Insert calls (including duplicates), summed over merged filters.
    items_inserted: u64,
    /// The n the filter was sized for, 0 when sized explicitly.
    expected_items: u64,
    /// The p the filter was sized for, 0 when sized explicitly.
    target_fpp: f64,
    /// The vector code its queries and batches run: the fastest kernel this CPU runs (and
    /// [`KERNEL_VAR`](crate::hashing::block_kernel::KERNEL_VAR) allows), chosen once when the
    /// filter is made (choosing it on every query took 30 of a single-key query's 205
    /// instructions). It picks the blocked layout's test and hash, and whether Hadoop's and
    /// Spark's batches hash their keys in AVX2 lanes.
    kernel: BlockKernel,
    /// How its keys were encoded, where known (native files record it).
    key_form: Option<KeyForm>,
    /// The [`KeyHash::identity`] of its scheme and seed, which every
    /// [`contains_hash`](Self::contains_hash) compares: kept, since working it out of the
    /// scheme took a dozen of that query's few dozen instructions.
    key_hash_identity: u64,
    /// The code of its single-key queries, for its layout, scheme, k and kernel.
    query: QueryCode,
}

/// The code of a filter's single-key queries, [`BloomFilter::contains`] and
/// [`BloomFilter::contains_hash`], chosen with its kernel ([`QueryCode::new`]) for its layout,
/// scheme and k: each query is one indirect call to it, as sbbf-rs-safe's is. With the code
/// chosen on every query (layout, scheme, kernel, then k) and the 24-byte key hash passed
/// through memory, `cargo bench --bench filter` timed the query from a hash at 4.9–5.0 ns a key
/// (n = 10^6), with this 3.8–3.9 (sbbf-rs-safe's: 2.4–2.7; the key's query 13.6–13.8 and
/// 13.4). A scratch loop with the same test inlined, which code compiled for AVX-512 cannot be
/// into its callers, took 1.9–2.0 ns. The call itself costs little: what counts is the
/// instructions a query takes, the fewer the more queries in flight (see [`ANY_K`]). Of the
/// rest, the key hash's third word (the scheme and seed checked) costs about 0.5 ns: a scratch
/// loop of 16-byte hashes took 2.9 ns against 3.4 with 24, and one that remixed x on each query
/// instead of passing z, 4.1.
#[derive(Clone, Copy)]
struct QueryCode {
    key: KeyQuery,
    hash: HashQuery,
}

/// A query of a key.
type KeyQuery = unsafe fn(&BloomFilter, &[u8]) -> bool;

/// A query of a key hash: it takes the hash's two words, checked against the filter before the
/// call.
type HashQuery = unsafe fn(&BloomFilter, u64, u64) -> bool;

impl QueryCode {
    /// The queries of a filter of `spec` run by `kernel`, which must run on this CPU.
    fn new(spec: &FilterSpec, kernel: BlockKernel) -> Self {
        match (spec.layout, spec.scheme) {
            (Layout::Standard, _) => QueryCode { key: BloomFilter::contains_standard, hash: BloomFilter::contains_standard_hash },
            (Layout::Blocked, Scheme::NativeLookup3) => Self::blocked::<Lookup3Pair>(spec, kernel),
            (Layout::Blocked, _) => Self::blocked::<Lookup2Pair>(spec, kernel),
        }
    }

    /// The blocked layout's queries, hashed by `H`, compiled for the filter's k where it is one
    /// of the usual 1..=7 (one remix's positions).
    fn blocked<H: PairHash>(spec: &FilterSpec, kernel: BlockKernel) -> Self {
        match spec.hashes {
            1 => Self::blocked_k::<H, 1>(kernel),
            2 => Self::blocked_k::<H, 2>(kernel),
            3 => Self::blocked_k::<H, 3>(kernel),
            4 => Self::blocked_k::<H, 4>(kernel),
            5 => Self::blocked_k::<H, 5>(kernel),
            6 => Self::blocked_k::<H, 6>(kernel),
            7 => Self::blocked_k::<H, 7>(kernel),
            _ => Self::blocked_k::<H, ANY_K>(kernel),
        }
    }

    /// The blocked layout's queries for k = `K` ([`ANY_K`]: the filter's). The key query is
    /// compiled for its k with the AVX-512 test only: the filter benchmark's key query (n =
    /// 10^6) took 13.7–13.75 ns so against 13.9–14.35 (3 interleaved runs); the other kernels'
    /// tests take their k in runs.
    fn blocked_k<H: PairHash, const K: u32>(kernel: BlockKernel) -> Self {
        let key: KeyQuery = match kernel {
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 if K != ANY_K => BloomFilter::contains_avx512_k::<H, K>,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => BloomFilter::contains_avx512::<H>,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => BloomFilter::contains_avx2::<H>,
            _ => BloomFilter::contains_portable::<H>,
        };
        QueryCode { key, hash: Self::blocked_hash_k::<K>(kernel) }
    }

    /// The blocked layout's query from a key hash for k = `K` ([`ANY_K`]: the filter's).
    fn blocked_hash_k<const K: u32>(kernel: BlockKernel) -> HashQuery {
        match kernel {
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 if K != ANY_K => BloomFilter::contains_hash_avx512::<K>,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => BloomFilter::contains_hash_avx512_runs,
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => BloomFilter::contains_hash_avx2::<K>,
            _ => BloomFilter::contains_hash_portable::<K>,
        }
    }
}

/// The `K` of a query from a key hash compiled for no one k: it reads the filter's
/// ([`BloomFilter::k`]), for k above 7.
///
/// Compiled for its k, the query from a key hash folds its test's lane mask (four instructions
/// of about 25) into the code, and fewer instructions a query let the CPU hold more queries,
/// each waiting on its cache miss, in flight: `cargo bench --bench filter` (n = 10^6,
/// AVX-512) timed it at 3.4–3.7 ns a key in calm runs, against 3.9–4.1 with k read from the
/// filter (sbbf-rs-safe's 2.5–2.7).
const ANY_K: u32 = 0;

#[cfg(test)]
impl QueryCode {
    /// Whether both are the same code: for a test that a filter runs its kernel's (the kernels
    /// answer alike, so only the code tells). Function addresses are no identity in general
    /// (one function may have two, two alike may share one), but these differ in their code.
    fn is(&self, other: &QueryCode) -> bool {
        std::ptr::fn_addr_eq(self.key, other.key) && std::ptr::fn_addr_eq(self.hash, other.hash)
    }
}

/// Always equal: the code is a function of the filter's spec and kernel, which the filters'
/// equality compares (and function pointers have no reliable equality).
impl PartialEq for QueryCode {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for QueryCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueryCode")
    }
}

impl BloomFilter {
    /// An empty filter sized for `n` expected items at false-positive rate `p`, seed 0.
    pub fn with_rate(n: u64, p: f64) -> Result<Self> {
        let spec = FilterSpec::native_for(n, p, 0)?;
        Ok(Self::new(spec).sized_for(n, p))
    }

    /// An empty filter with explicit m bits and k hashes, seed 0.
    pub fn with_bits(m: u64, k: u32) -> Result<Self> {
        Ok(Self::new(FilterSpec::native(m, k, 0)?))
    }

    /// An empty filter of a given identity.
    pub fn new(spec: FilterSpec) -> Self {
        Self::with_bits_array(spec, BitArray::new(spec.bits))
    }

    /// An empty filter for a job's partial: its bits in 4 KiB pages, written as they are
    /// allocated (see [`BitArray::new_partial`]), calling `tick` as it zeroes them, for a worker
    /// that must keep answering its peers meanwhile.
    pub fn new_partial(spec: FilterSpec, tick: &mut dyn FnMut()) -> Self {
        Self::with_bits_array(spec, BitArray::new_partial(spec.bits, tick))
    }

    /// An empty filter for the workers of a process to share
    /// ([`SharedFilter`](crate::shared_filter::SharedFilter)), zeroed by `threads` threads at
    /// once, as the partials it stands for would be.
    pub fn new_shared(spec: FilterSpec, threads: usize) -> Self {
        Self::with_bits_array(spec, BitArray::new_parallel(spec.bits, threads))
    }

    fn with_bits_array(spec: FilterSpec, bits: BitArray) -> Self {
        BloomFilter {
            spec,
            bits,
            items_inserted: 0,
            expected_items: 0,
            target_fpp: 0.0,
            kernel: BlockKernel::detect(),
            key_form: None,
            key_hash_identity: KeyHash::identity(spec.scheme, spec.seed),
            query: QueryCode::new(&spec, BlockKernel::detect()),
        }
    }

    /// Records the (n, p) this filter was sized for, reported by `info`.
    pub fn sized_for(mut self, n: u64, p: f64) -> Self {
        self.expected_items = n;
        self.target_fpp = p;
        self
    }

    /// Reassembles a filter from its parts (used by the file readers).
    pub fn from_parts(spec: FilterSpec, bits: BitArray, items_inserted: u64, expected_items: u64, target_fpp: f64) -> Self {
        assert_eq!(bits.len(), spec.bits);
        BloomFilter { items_inserted, expected_items, target_fpp, ..Self::with_bits_array(spec, bits) }
    }

    /// This filter with the code of `kernel` for its queries and batches, for benchmarks and
    /// tests (every kernel answers alike and sets the same bits); a kernel this CPU cannot run
    /// gives the portable code.
    pub fn with_kernel(mut self, kernel: BlockKernel) -> Self {
        self.kernel = self.runnable(kernel);
        self.query = QueryCode::new(&self.spec, self.kernel);
        self
    }

    /// The code this filter's queries and batches run (see [`with_kernel`](Self::with_kernel)).
    pub fn kernel(&self) -> BlockKernel {
        self.kernel
    }

    /// Sets the k bits of `key`.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        match self.spec.layout {
            Layout::Blocked => {
                let probe = self.spec.block_probe(key);
                self.bits.set_probe(self.spec.hashes, &probe);
            }
            Layout::Standard => {
                for pos in self.spec.positions(key) {
                    self.bits.set(pos);
                }
            }
        }
        self.items_inserted += 1;
    }

    /// False means `key` was definitely never inserted; true means it may have been.
    ///
    /// One call to the code of this filter's layout, scheme, k and CPU, chosen when the filter
    /// was made.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        // SAFETY: `query` was chosen for this filter's spec and kernel, which runs on this CPU
        // (`runnable`, `BlockKernel::detect`).
        unsafe { (self.query.key)(self, key) }
    }

    /// [`contains`](Self::contains) with a chosen blocked-layout kernel, for benchmarks and
    /// tests; a kernel this CPU cannot run (or the standard layout) answers as `contains` does.
    pub fn contains_with(&self, kernel: BlockKernel, key: &[u8]) -> bool {
        // SAFETY: as in `contains`, the kernel made runnable.
        unsafe { (QueryCode::new(&self.spec, self.runnable(kernel)).key)(self, key) }
    }

    /// Sets the k bits of the key whose hash is `hash` ([`FilterSpec::key_hash`]): the bits
    /// [`insert`](Self::insert) of that key sets.
    ///
    /// # Panics
    /// If `hash` was made for another scheme or seed than this filter's.
    pub fn insert_hash(&mut self, hash: KeyHash) {
        self.check_hash(hash);
        match self.spec.layout {
            Layout::Blocked => self.bits.set_probe(self.spec.hashes, &hash.block_probe(self.spec.bits / BLOCK_BITS)),
            Layout::Standard => {
                let (a, b) = hash.pair();
                NativePositions::from_hashes(a, b, self.spec.bits, self.spec.hashes).for_each(|pos| self.bits.set(pos))
            }
        }
        self.items_inserted += 1;
    }

    /// [`contains`](Self::contains) of the key whose hash is `hash` ([`FilterSpec::key_hash`]),
    /// without hashing it again: the same answer. A blocked filter takes the key's line from
    /// the hash and tests it with the filter's kernel, as `contains` does after its hash.
    ///
    /// # Panics
    /// If `hash` was made for another scheme or seed than this filter's: it would answer for
    /// another key, and "no" for a key inserted.
    #[inline]
    pub fn contains_hash(&self, hash: KeyHash) -> bool {
        self.check_hash(hash);
        // SAFETY: `query` was chosen for this filter's layout, k and kernel, which runs on
        // this CPU (`runnable`, `BlockKernel::detect`).
        unsafe { (self.query.hash)(self, hash.x, hash.z) }
    }

    /// Refuses a key hash made for another scheme or seed.
    #[inline(always)]
    fn check_hash(&self, hash: KeyHash) {
        assert!(
            hash.identity == self.key_hash_identity,
            "a key hash of another scheme or seed asked of a filter of scheme {:?} and seed {}",
            self.spec.scheme,
            self.spec.seed
        );
    }

    /// [`contains_hash`](Self::contains_hash) in the standard layout.
    fn contains_standard_hash(&self, x: u64, _z: u64) -> bool {
        let (a, b) = KeyHash::pair_of(x);
        NativePositions::from_hashes(a, b, self.spec.bits, self.spec.hashes).all(|pos| self.bits.get(pos))
    }

    /// [`contains_hash`](Self::contains_hash) in the blocked layout with the portable test.
    fn contains_hash_portable<const K: u32>(&self, x: u64, z: u64) -> bool {
        self.test_probe(&self.hash_probe(x, z), self.k::<K>())
    }

    /// [`contains_hash`](Self::contains_hash) in the blocked layout with the AVX-512 test, k ≤ 7.
    ///
    /// # Safety
    /// The CPU must run the avx512 kernel.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,bmi2")]
    unsafe fn contains_hash_avx512<const K: u32>(&self, x: u64, z: u64) -> bool {
        let probe = self.hash_probe(x, z);
        // SAFETY: the caller checked that the CPU runs the avx512 kernel.
        unsafe { block_avx512::test(self.bits.line(probe.block), probe.remixed(), self.k::<K>()) }
    }

    /// [`contains_hash`](Self::contains_hash) in the blocked layout with the AVX-512 test, for k
    /// above 7, in runs of 7 positions. A function apart from the usual k's, so that that one
    /// saves no registers: with both in one function, a scratch loop of queries from their
    /// hashes took 5.3–5.7 ns a key, with the larger k apart 4.9–5.2.
    ///
    /// # Safety
    /// The CPU must run the avx512 kernel.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,bmi2")]
    unsafe fn contains_hash_avx512_runs(&self, x: u64, z: u64) -> bool {
        let probe = self.hash_probe(x, z);
        // SAFETY: the caller checked that the CPU runs the avx512 kernel.
        test_runs(self.bits.line(probe.block), probe.remixed(), self.spec.hashes, |line, z, k| unsafe { block_avx512::test(line, z, k) })
    }

    /// [`contains_hash`](Self::contains_hash) in the blocked layout with the AVX2 test.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2")]
    unsafe fn contains_hash_avx2<const K: u32>(&self, x: u64, z: u64) -> bool {
        let probe = self.hash_probe(x, z);
        // SAFETY: the caller checked that the CPU has AVX2.
        test_runs(self.bits.line(probe.block), probe.remixed(), self.k::<K>(), |line, z, k| unsafe { block_avx2::test(line, z, k) })
    }

    /// The blocked probe of the key hash whose words are `x` and `z`.
    #[inline(always)]
    fn hash_probe(&self, x: u64, z: u64) -> BlockProbe {
        BlockProbe::of_hash(x, z, self.spec.bits / BLOCK_BITS)
    }

    /// `kernel` if this CPU runs it for this filter's k, else the portable one.
    fn runnable(&self, kernel: BlockKernel) -> BlockKernel {
        if kernel.runs() { kernel } else { BlockKernel::Portable }
    }

    /// [`contains`](Self::contains) in the standard layout.
    fn contains_standard(&self, key: &[u8]) -> bool {
        self.spec.positions(key).all(|pos| self.bits.get(pos))
    }

    /// One blocked query with the portable test.
    fn contains_portable<H: PairHash>(&self, key: &[u8]) -> bool {
        self.contains_probe(&self.spec.block_probe_by::<H>(key))
    }

    /// The filter's k in a query compiled for `K`: `K` itself, a constant, or the spec's for
    /// [`ANY_K`].
    #[inline(always)]
    fn k<const K: u32>(&self) -> u32 {
        if K == ANY_K { self.spec.hashes } else { K }
    }

    /// One blocked query with the AVX-512 test, hash included: compiled for AVX-512 as a whole,
    /// since code compiled for it cannot inline into code compiled without it.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,bmi2")]
    unsafe fn contains_avx512<H: PairHash>(&self, key: &[u8]) -> bool {
        let probe = self.spec.block_probe_by::<H>(key);
        // SAFETY: the caller checked that the CPU runs the avx512 kernel.
        test_runs(self.bits.line(probe.block), probe.remixed(), self.spec.hashes, |line, z, k| unsafe { block_avx512::test(line, z, k) })
    }

    /// [`contains_avx512`](Self::contains_avx512) for k = `K` ≤ 7, its lane mask a constant.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,bmi2")]
    unsafe fn contains_avx512_k<H: PairHash, const K: u32>(&self, key: &[u8]) -> bool {
        let probe = self.spec.block_probe_by::<H>(key);
        // SAFETY: the caller checked that the CPU runs the avx512 kernel.
        unsafe { block_avx512::test(self.bits.line(probe.block), probe.remixed(), K) }
    }

    /// One blocked query with the AVX2 test, hash included.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2")]
    unsafe fn contains_avx2<H: PairHash>(&self, key: &[u8]) -> bool {
        let probe = self.spec.block_probe_by::<H>(key);
        // SAFETY: the caller checked that the CPU has AVX2.
        test_runs(self.bits.line(probe.block), probe.remixed(), self.spec.hashes, |line, z, k| unsafe { block_avx2::test(line, z, k) })
    }

    /// The blocked layout's test of a key whose probe is computed (and its line perhaps
    /// prefetched) already: the portable reference for the AVX2 test.
    #[inline(always)]
    pub fn contains_probe(&self, probe: &BlockProbe) -> bool {
        self.test_probe(probe, self.spec.hashes)
    }

    /// [`contains_probe`](Self::contains_probe) of the first `k` positions, k being the
    /// filter's, given as a constant where the caller has one.
    #[inline(always)]
    fn test_probe(&self, probe: &BlockProbe, k: u32) -> bool {
        // Branch-free: a test that stopped at the first clear bit would branch on loaded data,
        // and each misprediction would make the next key wait for this key's cache miss.
        let line = self.bits.line(probe.block);
        let mut all = 1u64;
        probe.for_each_bit(k, |bit| all &= line[(bit >> 6) as usize] >> (bit & 63));
        all & 1 == 1
    }

    /// Whether every one of `positions` is set: the standard layout's test of a key whose
    /// positions are computed already.
    #[inline(always)]
    pub fn contains_positions(&self, positions: &[u64]) -> bool {
        positions.iter().fold(true, |all, &pos| all & self.bits.get(pos))
    }

    /// Inserts many keys: their positions (for the blocked layout, probes) are computed and
    /// their cache lines prefetched a group of keys at a time before any bit is set, so the
    /// loads overlap.
    pub fn insert_batch(&mut self, keys: &[&[u8]]) {
        insert_batch_into(self.spec, self.kernel, &mut self.bits, keys);
        self.items_inserted += keys.len() as u64;
    }

    /// Answers many keys at once: computes every key's probe and prefetches its cache line
    /// before testing any, so that the memory loads overlap instead of waiting one by one.
    /// Standard-layout native filters do the same with a group of keys' words; Hadoop's and
    /// Spark's test each key to its first clear bit, each word prefetched while other keys are
    /// tested.
    pub fn contains_batch(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        self.contains_batch_by_kernel(self.kernel, keys, answers);
    }

    /// [`contains_batch`](Self::contains_batch) with a chosen blocked-layout kernel (see
    /// [`contains_with`](Self::contains_with)).
    pub fn contains_batch_with(&self, kernel: BlockKernel, keys: &[&[u8]], answers: &mut Vec<bool>) {
        self.contains_batch_by_kernel(self.runnable(kernel), keys, answers);
    }

    /// The batched query with `kernel`, which must run on this CPU.
    fn contains_batch_by_kernel(&self, kernel: BlockKernel, keys: &[&[u8]], answers: &mut Vec<bool>) {
        answers.clear();
        if self.spec.layout != Layout::Blocked {
            if self.spec.scheme.is_native() {
                // Branch-free over a key's positions, as the blocked test is.
                standard_batch(self.spec, kernel, self.bits.line_ptr(0), keys, |positions| answers.push(self.contains_positions(positions)));
            } else {
                chained_queries(self, kernel, keys, answers);
            }
            return;
        }
        match self.spec.scheme {
            Scheme::NativeLookup3 => self.contains_batch_by::<Lookup3Pair>(kernel, keys, answers),
            _ => self.contains_batch_by::<Lookup2Pair>(kernel, keys, answers),
        }
    }

    fn contains_batch_by<H: PairHash>(&self, kernel: BlockKernel, keys: &[&[u8]], answers: &mut Vec<bool>) {
        let seed = self.spec.seed;
        match kernel {
            // SAFETY (both): the caller checked that the CPU runs the kernel.
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => unsafe { self.contains_batch_avx512::<H>(keys, answers) },
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => unsafe { self.contains_batch_avx2::<H>(keys, answers) },
            _ => self.contains_groups(keys, answers, |spec, group, probes| probe_group(spec, group, |group, out| H::pairs(group, seed, out), probes), |p| {
                self.contains_probe(p)
            }),
        }
    }

    /// The batched query with the AVX-512 hash and test, compiled for AVX-512 as a whole.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,bmi2")]
    unsafe fn contains_batch_avx512<H: PairHash>(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        let k = self.spec.hashes;
        // SAFETY (all): the caller checked that the CPU runs the avx512 kernel.
        let probe = |spec, group: &[&[u8]], probes: &mut _| unsafe { probe_group_avx512::<H>(spec, group, probes) };
        if k <= block_avx512::MAX_K {
            // The usual k: one remix, so the test is a few instructions that inline into the
            // loop. Through `test_runs` (whose loop serves larger k) the compiler called it,
            // with a `vzeroupper` and the constants reloaded per key: 10.0 ns a query where the
            // avx2 kernel took 7.4.
            self.contains_groups(keys, answers, probe, |p| unsafe { block_avx512::test(self.bits.line(p.block), p.remixed(), k) });
        } else {
            self.contains_groups(keys, answers, probe, |p| test_runs(self.bits.line(p.block), p.remixed(), k, |line, z, k| unsafe { block_avx512::test(line, z, k) }));
        }
    }

    /// The batched query with the AVX2 test, compiled for AVX2 as a whole.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2")]
    unsafe fn contains_batch_avx2<H: PairHash>(&self, keys: &[&[u8]], answers: &mut Vec<bool>) {
        let k = self.spec.hashes;
        // SAFETY (all): the caller checked that the CPU has AVX2.
        let probe = |spec, group: &[&[u8]], probes: &mut _| unsafe { probe_group_avx2::<H>(spec, group, probes) };
        if k <= block_avx2::MAX_K {
            // The usual k: one remix, whose demand is loaded once, not per key.
            let demand = unsafe { block_avx2::demand(k) };
            self.contains_groups(keys, answers, probe, |p| unsafe { block_avx2::test_demanding(self.bits.line(p.block), p.remixed(), demand) });
        } else {
            self.contains_groups(keys, answers, probe, |p| test_runs(self.bits.line(p.block), p.remixed(), k, |line, z, k| unsafe { block_avx2::test(line, z, k) }));
        }
    }

    /// Answers for keys whose blocked-layout probes are computed already (a counting filter's
    /// batched count computes them, and `subtract` checks its keys against the filter they
    /// are removed from with the same probes): [`contains_batch`](Self::contains_batch)
    /// without the hashing, each probe's line prefetched a few probes ahead of its test.
    pub fn contains_probes(&self, probes: &[BlockProbe], answers: &mut Vec<bool>) {
        answers.clear();
        self.extend_by_probes(probes, answers);
    }

    /// Answers for keys whose hashes are computed already ([`FilterSpec::key_hash`]), each as
    /// [`contains_hash`](Self::contains_hash) answers it: the batched form, whose blocked-layout
    /// lines are prefetched ahead of their tests as [`contains_probes`](Self::contains_probes)
    /// prefetches them. For keys hashed once and asked of many filters of their scheme and
    /// seed, or hashed where they are read.
    ///
    /// # Panics
    /// If a hash was made for another scheme or seed than this filter's.
    pub fn contains_hashes(&self, hashes: &[KeyHash], answers: &mut Vec<bool>) {
        answers.clear();
        // A batch no longer than the prefetch distance prefetches nothing: asked one by one,
        // it is spared the 4 KiB of probes below, set before their first use.
        if self.spec.layout != Layout::Blocked || hashes.len() <= PROBES_AHEAD {
            answers.extend(hashes.iter().map(|&hash| self.contains_hash(hash)));
            return;
        }
        let blocks = self.spec.bits / BLOCK_BITS;
        let mut probes = [BlockProbe::default(); HASHES_PROBED];
        for group in hashes.chunks(HASHES_PROBED) {
            for (probe, &hash) in probes.iter_mut().zip(group) {
                self.check_hash(hash);
                *probe = hash.block_probe(blocks);
            }
            self.extend_by_probes(&probes[..group.len()], answers);
        }
    }

    /// Appends the answers for `probes` to `answers`, with the filter's kernel.
    fn extend_by_probes(&self, probes: &[BlockProbe], answers: &mut Vec<bool>) {
        match self.kernel {
            // SAFETY (both): the filter's kernel runs on this CPU.
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => unsafe { self.contains_probes_avx512(probes, answers) },
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => unsafe { self.contains_probes_avx2(probes, answers) },
            _ => self.test_probes(probes, answers, |p| self.contains_probe(p)),
        }
    }

    /// [`contains_probes`](Self::contains_probes) with the AVX-512 test.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,bmi2")]
    unsafe fn contains_probes_avx512(&self, probes: &[BlockProbe], answers: &mut Vec<bool>) {
        let k = self.spec.hashes;
        // SAFETY (both): the caller checked that the CPU runs the avx512 kernel.
        match k <= block_avx512::MAX_K {
            true => self.test_probes(probes, answers, |p| unsafe { block_avx512::test(self.bits.line(p.block), p.remixed(), k) }),
            false => self.test_probes(probes, answers, |p| test_runs(self.bits.line(p.block), p.remixed(), k, |line, z, k| unsafe { block_avx512::test(line, z, k) })),
        }
    }

    /// [`contains_probes`](Self::contains_probes) with the AVX2 test.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,bmi2")]
    unsafe fn contains_probes_avx2(&self, probes: &[BlockProbe], answers: &mut Vec<bool>) {
        let k = self.spec.hashes;
        // SAFETY (all): the caller checked that the CPU has AVX2.
        match k <= block_avx2::MAX_K {
            true => {
                let demand = unsafe { block_avx2::demand(k) };
                self.test_probes(probes, answers, |p| unsafe { block_avx2::test_demanding(self.bits.line(p.block), p.remixed(), demand) });
            }
            false => self.test_probes(probes, answers, |p| test_runs(self.bits.line(p.block), p.remixed(), k, |line, z, k| unsafe { block_avx2::test(line, z, k) })),
        }
    }

    /// Tests each of `probes` with `test`, first prefetching the line of the probe
    /// [`PROBES_AHEAD`] places further on.
    #[inline(always)]
    fn test_probes(&self, probes: &[BlockProbe], answers: &mut Vec<bool>, test: impl Fn(&BlockProbe) -> bool) {
        let lines = self.bits.line_ptr(0);
        answers.extend(probes.iter().enumerate().map(|(i, probe)| {
            if let Some(ahead) = probes.get(i + PROBES_AHEAD) {
                prefetch(line_of(lines, ahead));
            }
            test(probe)
        }));
    }

    /// The batched blocked query, with `probe` hashing and probing each group of keys
    /// ([`probe_group`]) and `test` answering for one probe.
    #[inline(always)]
    fn contains_groups(
        &self,
        keys: &[&[u8]],
        answers: &mut Vec<bool>,
        probe: impl Fn(FilterSpec, &[&[u8]], &mut [BlockProbe; BATCH]),
        test: impl Fn(&BlockProbe) -> bool,
    ) {
        let lines = self.bits.line_ptr(0);
        pipelined(keys, lines, |group, probes| probe(self.spec, group, probes), |probes, next| {
            let (paired, rest) = beside_next(probes, next);
            answers.extend(paired.map(|(probe, upcoming)| {
                prefetch(line_of(lines, upcoming));
                test(probe)
            }));
            answers.extend(rest.iter().map(&test));
        });
    }

    /// ORs `other` into `self`: the filter of both key sets. Refuses a different identity.
    pub fn union(&mut self, other: &BloomFilter) -> Result<()> {
        self.spec.check_compatible(&other.spec)?;
        self.key_form = joint_key_form(self.key_form, other.key_form)?;
        self.bits.union_with(&other.bits);
        self.items_inserted += other.items_inserted;
        Ok(())
    }

    /// ANDs `other` into `self`: answers maybe only for keys both may contain.
    pub fn intersect(&mut self, other: &BloomFilter) -> Result<()> {
        self.spec.check_compatible(&other.spec)?;
        self.key_form = joint_key_form(self.key_form, other.key_form)?;
        self.bits.intersect_with(&other.bits);
        self.items_inserted = self.items_inserted.min(other.items_inserted);
        Ok(())
    }

    /// How the filter's keys were encoded, where known: a query must encode its keys alike
    /// ([`KeyForm::check`]).
    pub fn key_form(&self) -> Option<KeyForm> {
        self.key_form
    }

    /// Records how the filter's keys were encoded (written to native files).
    pub fn set_key_form(&mut self, form: Option<KeyForm>) {
        self.key_form = form;
    }

    /// Clears every bit and the insert count.
    pub fn clear(&mut self) {
        self.bits.clear();
        self.items_inserted = 0;
    }

    pub fn spec(&self) -> &FilterSpec {
        &self.spec
    }

    pub fn bits(&self) -> &BitArray {
        &self.bits
    }

    /// Mutable bits, for the merge step of the distributed build.
    pub fn bits_mut(&mut self) -> &mut BitArray {
        &mut self.bits
    }

    pub fn items_inserted(&self) -> u64 {
        self.items_inserted
    }

    /// Sets the insert count (the distributed build sums it over workers).
    pub fn set_items_inserted(&mut self, n: u64) {
        self.items_inserted = n;
    }

    pub fn expected_items(&self) -> u64 {
        self.expected_items
    }

    pub fn target_fpp(&self) -> f64 {
        self.target_fpp
    }

    /// This filter as one of a `factor`-th of its bits (or, in the blocked layout, of its
    /// blocks) would be, had every key been inserted there instead. The native schemes map a
    /// key into [0, m) by multiply-shift, ⌊x·m / 2^64⌋, and with m a multiple of `factor`,
    /// ⌊x·(m/factor) / 2^64⌋ = ⌊⌊x·m / 2^64⌋ / factor⌋: bit (or block) i of the result is the OR
    /// of bits (blocks) `factor`·i to `factor`·(i + 1) − 1 of this one (a block's bits do not
    /// depend on the block count). Hadoop's and Spark's map it by a remainder, |h| mod m, and
    /// (|h| mod m) mod (m/factor) = |h| mod (m/factor): bit i of the result is the OR of bits i,
    /// i + m/factor, i + 2·m/factor, ... of this one. None where `factor` is under 2 or does not
    /// divide the bits (blocks), or the format cannot hold that size (Spark's whole words).
    pub fn folded(&self, factor: u64) -> Option<BloomFilter> {
        let spec = self.spec;
        let folded_spec = folded_spec(spec, factor)?;
        let units = spec.bits / fold_unit(spec.layout);
        let mut bits = BitArray::new(folded_spec.bits);
        let set_bits = |each: &mut dyn FnMut(u64)| {
            for (i, &word) in self.bits.words().iter().enumerate() {
                let mut word = word;
                while word != 0 {
                    each(i as u64 * 64 + word.trailing_zeros() as u64);
                    word &= word - 1;
                }
            }
        };
        match spec.layout {
            _ if !spec.scheme.is_native() => set_bits(&mut |at| bits.set(at % folded_spec.bits)),
            Layout::Blocked => {
                for block in 0..(units / factor) as usize {
                    let line = bits.line_mut(block);
                    for from in block * factor as usize..(block + 1) * factor as usize {
                        line.iter_mut().zip(self.bits.line(from)).for_each(|(w, f)| *w |= f);
                    }
                }
            }
            Layout::Standard => set_bits(&mut |at| bits.set(at / factor)),
        }
        let mut folded = BloomFilter::from_parts(folded_spec, bits, self.items_inserted, self.expected_items, self.target_fpp);
        folded.kernel = self.kernel;
        folded.key_form = self.key_form;
        Some(folded)
    }

    /// Number of bits set.
    pub fn bits_set(&self) -> u64 {
        self.bits.count_ones()
    }

    /// Fraction of bits set.
    pub fn fill_ratio(&self) -> f64 {
        self.bits_set() as f64 / self.spec.bits as f64
    }

    /// Estimated distinct items inserted, from the bits set.
    pub fn estimated_items(&self) -> f64 {
        params::estimated_items(self.spec.bits, self.spec.hashes, self.bits_set())
    }

    /// The false-positive rate a query of an absent key has now, from the bits set. For the
    /// blocked layout, the mean over blocks of the block's fill^k, since blocks fill unevenly.
    pub fn estimated_fpp(&self) -> f64 {
        match self.spec.layout {
            Layout::Standard => params::fpp_from_fill(self.fill_ratio(), self.spec.hashes),
            Layout::Blocked => {
                let blocks = (self.spec.bits / BLOCK_BITS) as usize;
                blocked_fpp(self.spec.hashes, (0..blocks).map(|b| self.bits.line(b).iter().map(|w| w.count_ones()).sum()))
            }
        }
    }
}

/// The bits a filter folds by (see [`BloomFilter::folded`]): one, or in the blocked layout a
/// block's.
pub(crate) fn fold_unit(layout: Layout) -> u64 {
    if layout == Layout::Blocked { BLOCK_BITS } else { 1 }
}

/// The identity of a filter of `spec` folded by `factor` (see [`BloomFilter::folded`]): a
/// `factor`-th of its bits, the same hashes and seed. None where `factor` is under 2 or does not
/// divide its bits (in the blocked layout, its blocks), where the format cannot hold that size
/// (Spark's whole words), or for a blocked layout of a remainder scheme (whose fold is of bits,
/// while such a layout would place its blocks otherwise; none is made).
pub(crate) fn folded_spec(spec: FilterSpec, factor: u64) -> Option<FilterSpec> {
    if factor < 2 || (!spec.scheme.is_native() && spec.layout == Layout::Blocked) {
        return None;
    }
    if !(spec.bits / fold_unit(spec.layout)).is_multiple_of(factor) {
        return None;
    }
    FilterSpec::with_size(spec.scheme, spec.layout, spec.bits / factor, spec.hashes, spec.seed).ok().filter(|folded| folded.bits == spec.bits / factor)
}

/// The estimated false-positive rate of a blocked filter whose blocks have `set` bits set each,
/// in block order: the mean of the blocks' rates (a query tests one block). A block's rate
/// depends only on its count (0..=512): computed once per count, not once per block (a 24 MB
/// filter has 390,000 blocks; the powers took 3 ms of the build's serial end).
pub(crate) fn blocked_fpp(k: u32, set: impl ExactSizeIterator<Item = u32>) -> f64 {
    let per_count: Vec<f64> = (0..=BLOCK_BITS).map(|count| params::fpp_from_fill(count as f64 / BLOCK_BITS as f64, k)).collect();
    let blocks = set.len();
    set.map(|count| per_count[count as usize]).sum::<f64>() / blocks as f64
}

/// The key form of two filters combined: refused when both are known and differ (their bits
/// stand for keys encoded differently), else whichever is known.
pub(crate) fn joint_key_form(left: Option<KeyForm>, right: Option<KeyForm>) -> Result<Option<KeyForm>> {
    match (left, right) {
        (Some(l), Some(r)) if l != r => Err(crate::Error::Incompatible { what: "key", left: l.to_string(), right: r.to_string() }),
        _ => Ok(left.or(right)),
    }
}

/// Where a batched insert sets its bits: a filter's own array ([`BitArray`]), or a process's
/// filter that all its workers fill at once
/// ([`SharedFilter`](crate::shared_filter::SharedFilter), by atomic OR).
pub(crate) trait BitSink {
    /// The first line of the bits, for prefetching only.
    fn lines(&self) -> *const u8;
    /// Sets the k bits of a blocked probe, in its one cache line.
    fn set_probe(&mut self, k: u32, probe: &BlockProbe);
    /// Sets bit `pos`.
    fn set(&mut self, pos: u64);
}

impl BitSink for BitArray {
    #[inline(always)]
    fn lines(&self) -> *const u8 {
        self.line_ptr(0)
    }

    #[inline(always)]
    fn set_probe(&mut self, k: u32, probe: &BlockProbe) {
        let line = self.line_mut(probe.block);
        probe.for_each_bit(k, |bit| line[(bit >> 6) as usize] |= 1u64 << (bit & 63));
    }

    #[inline(always)]
    fn set(&mut self, pos: u64) {
        BitArray::set(self, pos);
    }
}

/// The batched insert of a filter of identity `spec` into `sink`, with `kernel`'s code (one
/// this CPU runs): see [`BloomFilter::insert_batch`].
pub(crate) fn insert_batch_into<S: BitSink>(spec: FilterSpec, kernel: BlockKernel, sink: &mut S, keys: &[&[u8]]) {
    if spec.layout != Layout::Blocked {
        let lines = sink.lines();
        standard_batch(spec, kernel, lines, keys, |positions| positions.iter().for_each(|&pos| sink.set(pos)));
        return;
    }
    match spec.scheme {
        Scheme::NativeLookup3 => insert_groups_by::<Lookup3Pair, S>(spec, kernel, sink, keys),
        _ => insert_groups_by::<Lookup2Pair, S>(spec, kernel, sink, keys),
    }
}

/// The batched blocked insert, compiled once per native scheme and per kernel (the vector
/// kernels hash many keys at a time).
fn insert_groups_by<H: PairHash, S: BitSink>(spec: FilterSpec, kernel: BlockKernel, sink: &mut S, keys: &[&[u8]]) {
    let seed = spec.seed;
    match kernel {
        // SAFETY: the filter's kernel is one this CPU runs.
        #[cfg(target_arch = "x86_64")]
        BlockKernel::Avx512 => unsafe { insert_groups_avx512::<H, S>(spec, sink, keys) },
        #[cfg(target_arch = "x86_64")]
        BlockKernel::Avx2 => unsafe { insert_groups_avx2::<H, S>(spec, sink, keys) },
        _ => insert_groups(spec, sink, keys, |spec, group, probes| probe_group(spec, group, |group, out| H::pairs(group, seed, out), probes)),
    }
}

/// The batched insert compiled for AVX-512 as a whole, so that the wide hash inlines.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,bmi2")]
unsafe fn insert_groups_avx512<H: PairHash, S: BitSink>(spec: FilterSpec, sink: &mut S, keys: &[&[u8]]) {
    // SAFETY: the caller checked that the CPU runs the avx512 kernel.
    insert_groups(spec, sink, keys, |spec, group, probes| unsafe { probe_group_avx512::<H>(spec, group, probes) });
}

/// The batched insert compiled for AVX2 as a whole, so that the wide hash inlines.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi2")]
unsafe fn insert_groups_avx2<H: PairHash, S: BitSink>(spec: FilterSpec, sink: &mut S, keys: &[&[u8]]) {
    // SAFETY: the caller checked that the CPU has AVX2.
    insert_groups(spec, sink, keys, |spec, group, probes| unsafe { probe_group_avx2::<H>(spec, group, probes) });
}

/// The batched blocked insert, with `probe` hashing and probing each group of keys
/// ([`probe_group`]).
#[inline(always)]
fn insert_groups<S: BitSink>(spec: FilterSpec, sink: &mut S, keys: &[&[u8]], probe: impl Fn(FilterSpec, &[&[u8]], &mut [BlockProbe; BATCH])) {
    let (k, lines) = (spec.hashes, sink.lines());
    pipelined(keys, lines, |group, probes| probe(spec, group, probes), |probes, next| {
        let (paired, rest) = beside_next(probes, next);
        for (probe, upcoming) in paired {
            prefetch(line_of(lines, upcoming));
            sink.set_probe(k, probe);
        }
        rest.iter().for_each(|probe| sink.set_probe(k, probe));
    });
}

/// Runs `then` on the probes of each group of [`BATCH`] keys one group late, with the probes of
/// the group after it, whose lines it prefetches as it goes ([`beside_next`]): a group is hashed
/// while the group before it waits for its lines, so the memory system always has a group's
/// loads in flight. (Hashing and testing each group in turn left it idle during every test
/// phase.) The first group's lines, which no group's test precedes, are prefetched at once.
/// `probe` fills one of two buffers while the other waits, so that no group's probes are copied.
#[inline(always)]
fn pipelined(keys: &[&[u8]], lines: *const u8, mut probe: impl FnMut(&[&[u8]], &mut [BlockProbe; BATCH]), mut then: impl FnMut(&[BlockProbe], &[BlockProbe])) {
    let mut buffers = [[BlockProbe::default(); BATCH]; 2];
    // The length of the group waiting for its test.
    let mut waiting = 0;
    for (i, group) in keys.chunks(BATCH).enumerate() {
        probe(group, &mut buffers[i % 2]);
        let [even, odd] = &buffers;
        let (next, before) = if i % 2 == 0 { (even, odd) } else { (odd, even) };
        let next = &next[..group.len()];
        if i == 0 {
            next.iter().for_each(|p| prefetch(line_of(lines, p)));
        } else {
            then(&before[..waiting], next);
        }
        waiting = group.len();
    }
    if waiting > 0 {
        // The last group, whose probes are in the buffer of its index's parity.
        let last = (keys.len() - 1) / BATCH;
        then(&buffers[last % 2][..waiting], &[]);
    }
}

/// How many probes ahead of its test [`BloomFilter::contains_probes`] prefetches a line.
const PROBES_AHEAD: usize = 16;

/// The hashes [`BloomFilter::contains_hashes`] makes probes of at a time, on the stack (4 KiB):
/// at each group's end [`PROBES_AHEAD`] lines go unprefetched, a sixteenth of them. Each probe
/// computed as it was tested (and again to prefetch its line), with no store between, took 4.8
/// ns a query where these groups take 2.9 (n = 10^6, the filter benchmark).
const HASHES_PROBED: usize = 256;

/// Keys whose positions a standard-layout batch computes, and whose words it prefetches, before
/// testing or setting any of them: at the usual k of 7, 56 words in flight.
const STANDARD_GROUP: usize = 8;

/// The standard layout's batched insert or query: [`standard_groups`] with the positions of the
/// filter's scheme, the native ones computed straight from the hash pair (through the
/// [`Positions`](crate::hashing::Positions) iterator of every scheme, a position took 24
/// instructions), a Hadoop filter's from its hashes computed a group of keys at a time
/// ([`HadoopRows`](crate::hashing::hadoop_rows::HadoopRows)), a Spark filter's from its hash
/// pairs computed so (`-w 1` build of 2M keys: 597 instructions a record with one key at a
/// time, 528 so), the others' by [`Positions::fill`](crate::hashing::Positions::fill). Hadoop's
/// and Spark's are hashed in lanes where `kernel` is a vector one.
fn standard_batch(spec: FilterSpec, kernel: BlockKernel, lines: *const u8, keys: &[&[u8]], each: impl FnMut(&[u64])) {
    fn native<H: PairHash>(spec: FilterSpec) -> impl Fn(usize, &[u8], &mut [u64]) {
        move |_, key, out| {
            let (a, b) = H::pair(key, spec.seed);
            out.iter_mut().zip(NativePositions::from_hashes(a, b, spec.bits, spec.hashes)).for_each(|(slot, pos)| *slot = pos);
        }
    }
    match spec.scheme {
        Scheme::Native => standard_groups(spec, lines, keys, native::<Lookup2Pair>(spec), each),
        Scheme::NativeLookup3 => standard_groups(spec, lines, keys, native::<Lookup3Pair>(spec), each),
        #[cfg(target_arch = "x86_64")]
        Scheme::Hadoop(hash) if let Some(mut rows) = HadoopRows::new(hash, spec.hashes, spec.bits, 1, kernel) => {
            // Each group's hashes when its first key's positions are asked for.
            let positions = |i: usize, _: &[u8], out: &mut [u64]| {
                if i.is_multiple_of(GROUP) {
                    rows.hash(0, &keys[i..keys.len().min(i + GROUP)]);
                }
                rows.positions(0, i % GROUP, out);
            };
            standard_groups(spec, lines, keys, positions, each)
        }
        #[cfg(target_arch = "x86_64")]
        Scheme::SparkV1 | Scheme::SparkV2 if let Some(mut pairs) = SparkPairs::new(spec.scheme, spec.seed, spec.hashes, spec.bits, kernel) => {
            // Each group's hash pairs when its first key's positions are asked for.
            let positions = |i: usize, _: &[u8], out: &mut [u64]| {
                if i.is_multiple_of(GROUP) {
                    pairs.hash(&keys[i..keys.len().min(i + GROUP)]);
                }
                pairs.positions(i % GROUP).fill(out);
            };
            standard_groups(spec, lines, keys, positions, each)
        }
        _ => standard_groups(spec, lines, keys, |_, key, out| spec.positions(key).fill(out), each),
    }
}

/// Keys in flight in a chained query: a word is tested this many tests after its prefetch, about
/// as far ahead as a group of [`STANDARD_GROUP`] keys.
const CHAIN: usize = 16;

/// The batched query of Hadoop's and Spark's filters, as a chain: [`CHAIN`] keys in flight, each
/// having asked for the word of its next position, tested in turn. A key whose bit is clear is
/// answered absent; one whose bit is set asks for its next position's word and waits its next
/// turn; one with no positions left is present. A key answered gives its place to the next key.
/// So a key's positions are taken one at a time up to its first clear bit, as one key at a
/// time does (most of a semi-join's probe keys are absent), yet every word, not only the first,
/// is loaded while other keys are tested. Keys keep their places in the chain: a queue, which
/// moved a key's state at each of its turns, took 107 more instructions a key than the query
/// before (1M keys through a Spark filter, callgrind); this takes 12 more.
///
/// Each position of a Hadoop filter is a hash of the key. They are computed a group of keys at
/// a time by the avx2 lookup3 or Murmur, all k of them, where `kernel` is a vector one
/// ([`HadoopRing`]). A Spark filter's two hashes are computed a group of keys at a time by the
/// avx2 Murmur3 (`query` of 1M keys through the build side's Spark filter: 406 instructions a
/// key with one key at a time, 354 so), its positions from them as the chain asks. The other
/// filters' positions are computed as the chain asks for them ([`Lazily`]).
///
/// With every position of a group computed and prefetched ([`standard_groups`]), a semi-join
/// through a 1.7 MB Hadoop filter took 1.45-1.63 s against 1.13-1.21 key by key. With only the
/// first words prefetched, 20M keys through a 24 MB Hadoop filter of every key took 12.0-13.8 s
/// (6 runs), against 4.5-5.5 s chained.
fn chained_queries(filter: &BloomFilter, kernel: BlockKernel, keys: &[&[u8]], answers: &mut Vec<bool>) {
    let spec = filter.spec;
    #[cfg(target_arch = "x86_64")]
    if let Scheme::Hadoop(hash) = spec.scheme {
        if let Some(ring) = HadoopRing::new(hash, spec, keys, kernel) {
            return chain(filter, keys.len(), ring, answers);
        }
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(pairs) = SparkPairs::new(spec.scheme, spec.seed, spec.hashes, spec.bits, kernel) {
        let positions = keys.chunks(GROUP).flat_map(move |group| {
            let mut pairs = pairs;
            pairs.hash(group);
            (0..group.len()).map(move |i| {
                let mut positions = pairs.positions(i);
                (positions.next().expect("k is at least 1"), positions)
            })
        });
        return chain(filter, keys.len(), Lazily(positions.enumerate()), answers);
    }
    let positions = keys.iter().map(|key| {
        let mut positions = spec.positions(key);
        (positions.next().expect("k is at least 1"), positions)
    });
    chain(filter, keys.len(), Lazily(positions.enumerate()), answers);
}

/// Where a [`chain`] takes its keys from, and how a key in flight finds its next position.
trait Flights {
    /// What a key in flight keeps to find its positions after the one it asked for.
    type Rest;
    /// The next key to put in flight, in order: its index, its first position and its rest.
    fn admit(&mut self) -> Option<(usize, u64, Self::Rest)>;
    /// The position after the one the key asked for last, if it has one.
    fn next(&self, rest: &mut Self::Rest) -> Option<u64>;
}

/// Keys whose positions are computed one at a time, as the chain asks for them: an iterator of
/// each key's index, first position and [`Positions`] after it.
struct Lazily<I>(I);

impl<'k, I: Iterator<Item = (usize, (u64, Positions<'k>))>> Flights for Lazily<I> {
    type Rest = Positions<'k>;

    #[inline(always)]
    fn admit(&mut self) -> Option<(usize, u64, Positions<'k>)> {
        self.0.next().map(|(i, (first, rest))| (i, first, rest))
    }

    #[inline(always)]
    fn next(&self, rest: &mut Positions<'k>) -> Option<u64> {
        rest.next()
    }
}

/// A Hadoop filter's keys, their k hashes computed a group of keys at a time as the
/// group's first key is put in flight, into a ring of slots ([`HadoopRows`]) that outlasts every
/// key in flight. A key in flight is turned at least once every [`CHAIN`] turns and answered by
/// its k-th, and each turn puts at most one key in flight: so at most k · CHAIN keys are put in
/// flight while one is, and a ring of that many keys and a group more is never overwritten
/// under a key still in flight.
///
/// All k hashes, though most keys are answered at their first or second position: in lanes
/// they cost about what the few computed one by one did. `query` of 1M keys through the build
/// side's Hadoop Jenkins filter (most keys absent), with the first hash a group at a time and
/// the rest one by one as the chain asked for them: 366 instructions a key (callgrind), 353
/// so, the same answers. Through a 24 MB filter of every key, whose keys need all k positions,
/// 20M keys took 4.25-4.43 s, 3.37-4.08 so.
#[cfg(target_arch = "x86_64")]
struct HadoopRing<'a, 'k> {
    keys: &'a [&'k [u8]],
    rows: HadoopRows,
    slots: usize,
    k: usize,
    /// The keys put in flight so far.
    admitted: usize,
}

#[cfg(target_arch = "x86_64")]
impl<'a, 'k> HadoopRing<'a, 'k> {
    /// None where `kernel` is not a vector one ([`HadoopRows::new`]).
    fn new(hash: HadoopHash, spec: FilterSpec, keys: &'a [&'k [u8]], kernel: BlockKernel) -> Option<Self> {
        let k = spec.hashes as usize;
        let slots = (k * CHAIN).div_ceil(GROUP) + 1;
        let rows = HadoopRows::new(hash, spec.hashes, spec.bits, slots, kernel)?;
        Some(HadoopRing { keys, rows, slots, k, admitted: 0 })
    }
}

#[cfg(target_arch = "x86_64")]
impl Flights for HadoopRing<'_, '_> {
    /// The key's index, and how many of its positions it has asked for.
    type Rest = (usize, usize);

    #[inline(always)]
    fn admit(&mut self) -> Option<(usize, u64, (usize, usize))> {
        let i = self.admitted;
        if i == self.keys.len() {
            return None;
        }
        let slot = i / GROUP % self.slots;
        if i.is_multiple_of(GROUP) {
            self.rows.hash(slot, &self.keys[i..self.keys.len().min(i + GROUP)]);
        }
        self.admitted += 1;
        Some((i, self.rows.position(slot, i % GROUP, 0), (i, 1)))
    }

    #[inline(always)]
    fn next(&self, (i, asked): &mut (usize, usize)) -> Option<u64> {
        if *asked == self.k {
            return None;
        }
        *asked += 1;
        Some(self.rows.position(*i / GROUP % self.slots, *i % GROUP, *asked - 1))
    }
}

/// The chain of [`chained_queries`] over `n` keys, put in flight by `flights`.
fn chain<F: Flights>(filter: &BloomFilter, n: usize, mut flights: F, answers: &mut Vec<bool>) {
    let lines = filter.bits.line_ptr(0);
    // Absent until the chain finds a key present.
    answers.resize(n, false);
    // A key put in flight: its index, the position whose word it asked for, its rest.
    let ask = |flights: &mut F| {
        flights.admit().map(|(i, first, rest)| {
            prefetch(word_of(lines, first));
            (i, first, rest)
        })
    };
    let mut chain: Vec<(usize, u64, F::Rest)> = std::iter::from_fn(|| ask(&mut flights)).take(CHAIN).collect();
    let mut turn = 0;
    while !chain.is_empty() {
        if turn >= chain.len() {
            turn = 0;
        }
        let (i, pos, rest) = &mut chain[turn];
        let set = filter.bits.get(*pos);
        let next = if set { flights.next(rest) } else { None };
        if set && next.is_none() {
            answers[*i] = true;
        }
        if let Some(next) = next {
            prefetch(word_of(lines, next));
            *pos = next;
            turn += 1;
        } else if let Some(key) = ask(&mut flights) {
            chain[turn] = key;
            turn += 1;
        } else {
            chain.swap_remove(turn);
        }
    }
}

/// The k positions of each group of [`STANDARD_GROUP`] keys written by `positions` (given each
/// key's index in `keys`, in order) and their words prefetched, then `each` called with the
/// positions of every key of the group before, in order: a group's loads overlap the group
/// before's tests, as in the blocked layout's [`pipelined`]. One key at a time, a key's k words each waited for their loads with little
/// overlap. `lines` is the filter's first line.
///
/// A function of its own for each `positions` and `each`, into which both are inlined: inlined
/// into its callers (each a match over every scheme's), it once grew them past where the
/// compiler inlines a closure, and a lookup3 filter's batched queries called the positions'
/// for every key: 27.2-28.5 ns a key, against 26.
#[inline(never)]
fn standard_groups(spec: FilterSpec, lines: *const u8, keys: &[&[u8]], mut positions: impl FnMut(usize, &[u8], &mut [u64]), mut each: impl FnMut(&[u64])) {
    let k = spec.hashes as usize;
    let mut buffers = [vec![0u64; STANDARD_GROUP * k], vec![0u64; STANDARD_GROUP * k]];
    // The number of keys whose positions each buffer holds, not yet passed to `each`.
    let mut held = [0usize; 2];
    for (i, group) in keys.chunks(STANDARD_GROUP).enumerate() {
        let [even, odd] = &mut buffers;
        let (next, before) = if i % 2 == 0 { (even, odd) } else { (odd, even) };
        for (j, (key, out)) in group.iter().zip(next.chunks_exact_mut(k)).enumerate() {
            positions(i * STANDARD_GROUP + j, key, out);
            out.iter().for_each(|&pos| prefetch(word_of(lines, pos)));
        }
        before[..held[1 - i % 2] * k].chunks_exact(k).for_each(&mut each);
        held = if i % 2 == 0 { [group.len(), 0] } else { [0, group.len()] };
    }
    // The last group's.
    for (buffer, &keys) in buffers.iter().zip(&held) {
        buffer[..keys * k].chunks_exact(k).for_each(&mut each);
    }
}

/// A group's probes paired with the next group's, index by index, and the rest of the group's,
/// which have none: the test (or insert) of each paired probe first prefetches the line of its
/// partner, so that the next group's prefetches spread through this group's tests. Issued all
/// at once after a group's probes (computed four or eight to a vector), 64 prefetches cost time,
/// likely waiting for the CPU's miss buffers (this host has no counters to tell): with the
/// filter in DRAM, batched queries took 32.4 ns where prefetches issued one per probe as it was
/// computed took 27.6 (interleaved medians); spread this way, 19.8. Every group but the last
/// has as many keys as the one after it, so none of the next group's lines is missed. (Two
/// loops, not one that asks whether the next group has a probe at each index: 2 instructions
/// fewer a key.)
#[inline(always)]
fn beside_next<'a>(probes: &'a [BlockProbe], next: &'a [BlockProbe]) -> (std::iter::Zip<std::slice::Iter<'a, BlockProbe>, std::slice::Iter<'a, BlockProbe>>, &'a [BlockProbe]) {
    let (paired, rest) = probes.split_at(probes.len().min(next.len()));
    (paired.iter().zip(next), rest)
}

/// Where the word holding bit `pos` is, `lines` being the first line of the filter's bits: for
/// a prefetch only, as [`line_of`].
#[inline(always)]
fn word_of(lines: *const u8, pos: u64) -> *const u8 {
    lines.wrapping_add((pos / 64 * 8) as usize)
}

/// Where the line of `probe` starts, `lines` being the first line of the filter's bits: for a
/// prefetch only, which reads nothing (hence wrapping arithmetic, no bounds).
#[inline(always)]
fn line_of(lines: *const u8, probe: &BlockProbe) -> *const u8 {
    lines.wrapping_add(probe.block * 64)
}

/// The first phase of a batched operation: hashes a group of at most [`BATCH`] keys with
/// `pairs` and computes their probes into `probes` (whose lines [`pipelined`] prefetches).
#[inline(always)]
fn probe_group(spec: FilterSpec, group: &[&[u8]], pairs: impl Fn(&[&[u8]], &mut Pairs), probes: &mut [BlockProbe; BATCH]) {
    let mut hashes = Pairs::default();
    pairs(group, &mut hashes);
    probes_one_by_one(spec, &hashes, group.len(), probes);
}

/// The probes of the first `len` keys of a group hashed into `pairs`.
#[inline(always)]
fn probes_one_by_one(spec: FilterSpec, pairs: &Pairs, len: usize, probes: &mut [BlockProbe; BATCH]) {
    // One index for all three arrays (an iterator and its enumeration took two), and no bounds
    // tests past this one.
    assert!(len <= BATCH && BATCH <= pairs.c.len());
    #[allow(clippy::needless_range_loop)]
    for i in 0..len {
        probes[i] = spec.block_probe_of(pairs.c[i], pairs.b[i]);
    }
}

/// [`probe_group`] for the avx512 kernel: the scheme's wide hash if it has one, and the
/// probes computed eight to a vector where the filter has fewer than 2^32 blocks (256 GiB).
///
/// # Safety
/// The CPU must run the avx512 kernel.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,bmi2")]
unsafe fn probe_group_avx512<H: PairHash>(spec: FilterSpec, group: &[&[u8]], probes: &mut [BlockProbe; BATCH]) {
    let mut pairs = Pairs::default();
    // SAFETY: the caller runs the avx512 kernel.
    unsafe { H::pairs_avx512(group, spec.seed, &mut pairs) };
    let blocks = spec.bits / BLOCK_BITS;
    if blocks >= 1 << 32 {
        return probes_one_by_one(spec, &pairs, group.len(), probes);
    }
    block_avx512::probes(&pairs, blocks, probes);
}

/// [`probe_group`] for the avx2 kernel: the scheme's wide hash if it has one, then the probes
/// computed four to a vector where the filter has fewer than 2^32 blocks.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,bmi2")]
unsafe fn probe_group_avx2<H: PairHash>(spec: FilterSpec, group: &[&[u8]], probes: &mut [BlockProbe; BATCH]) {
    let mut pairs = Pairs::default();
    // SAFETY (both): the caller checked that the CPU has AVX2.
    unsafe { H::pairs_avx2(group, spec.seed, &mut pairs) };
    let blocks = spec.bits / BLOCK_BITS;
    if blocks >= 1 << 32 {
        return probes_one_by_one(spec, &pairs, group.len(), probes);
    }
    unsafe { block_avx2::probes(&pairs, blocks, probes) };
}

/// The blocked probes of `keys` under `spec` (a native scheme's), appended to `out` in order,
/// hashed a group of keys at a time by `kernel`'s code, which must run on this CPU: for a
/// counting filter's batched insert, which takes positions from probes as a plain filter does.
pub(crate) fn block_probes(spec: FilterSpec, kernel: BlockKernel, keys: &[&[u8]], out: &mut Vec<BlockProbe>) {
    fn by<H: PairHash>(spec: FilterSpec, kernel: BlockKernel, keys: &[&[u8]], out: &mut Vec<BlockProbe>) {
        match kernel {
            // SAFETY (both): the caller's kernel runs on this CPU.
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx512 => unsafe { probes_avx512::<H>(spec, keys, out) },
            #[cfg(target_arch = "x86_64")]
            BlockKernel::Avx2 => unsafe { probes_avx2::<H>(spec, keys, out) },
            _ => probes_in_groups(keys, out, |group, probes| probe_group(spec, group, |group, pairs| H::pairs(group, spec.seed, pairs), probes)),
        }
    }
    match spec.scheme {
        Scheme::NativeLookup3 => by::<Lookup3Pair>(spec, kernel, keys, out),
        _ => by::<Lookup2Pair>(spec, kernel, keys, out),
    }
}

/// The probes of `keys`, a group at a time through `probe`, appended to `out`.
#[inline(always)]
fn probes_in_groups(keys: &[&[u8]], out: &mut Vec<BlockProbe>, probe: impl Fn(&[&[u8]], &mut [BlockProbe; BATCH])) {
    let mut probes = [BlockProbe::default(); BATCH];
    for group in keys.chunks(BATCH) {
        probe(group, &mut probes);
        out.extend_from_slice(&probes[..group.len()]);
    }
}

/// [`probes_in_groups`] compiled for AVX-512 as a whole, so that the wide hash inlines.
///
/// # Safety
/// The CPU must run the avx512 kernel.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,bmi2")]
unsafe fn probes_avx512<H: PairHash>(spec: FilterSpec, keys: &[&[u8]], out: &mut Vec<BlockProbe>) {
    // SAFETY: the caller runs the avx512 kernel.
    probes_in_groups(keys, out, |group, probes| unsafe { probe_group_avx512::<H>(spec, group, probes) });
}

/// [`probes_in_groups`] compiled for AVX2 as a whole.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi2")]
unsafe fn probes_avx2<H: PairHash>(spec: FilterSpec, keys: &[&[u8]], out: &mut Vec<BlockProbe>) {
    // SAFETY: the caller checked that the CPU has AVX2.
    probes_in_groups(keys, out, |group, probes| unsafe { probe_group_avx2::<H>(spec, group, probes) });
}

/// Asks the CPU to start loading the cache line at `line` into L2: a hint, which reads nothing
/// and cannot fault. L2, not L1: a group prefetches 64 lines at once, more misses than an L1
/// cache keeps outstanding, and the later prefetches waited for the earlier ones; L2 keeps more
/// in flight, and the test's load takes the line from L2 in a few cycles. Benchmark (batched
/// queries, 1% filters): 5.7 -> 5.1 ns per key for 10^7 keys, 3.4 -> 3.0 ns for 10^6; the jobs
/// within noise.
#[inline(always)]
fn prefetch(line: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching has no effect on memory and faults on no address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(line as *const i8, std::arch::x86_64::_MM_HINT_T1);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

#[cfg(test)]
mod tests {

    /// A filter folded by 2, 3, 4, 6 or 8 is, bit for bit, the filter of that fraction of its
    /// size built from the same keys: both native schemes in both layouts, Hadoop's and Spark's
    /// schemes; a factor that does not divide it, or a Spark size of part of a word, is not
    /// folded.
    #[test]
    fn a_folded_filter_is_the_smaller_filter_of_the_same_keys() {
        use crate::hashing::HadoopHash;
        let keys: Vec<Vec<u8>> = (0..3_000u32).map(|i| format!("key {i}").into_bytes()).collect();
        let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        let filled = |scheme: Scheme, layout: Layout, bits: u64| {
            let mut filter = BloomFilter::new(FilterSpec::with_size(scheme, layout, bits, 5, 7).unwrap());
            filter.insert_batch(&keys);
            filter
        };
        for scheme in [Scheme::Native, Scheme::NativeLookup3] {
            for layout in [Layout::Standard, Layout::Blocked] {
                let big = filled(scheme, layout, 512 * 48);
                for factor in [2, 3, 4, 6, 8] {
                    let folded = big.folded(factor).expect("a factor of the size");
                    let direct = filled(scheme, layout, 512 * 48 / factor);
                    assert_eq!(folded.spec(), direct.spec(), "{scheme:?} {layout:?} / {factor}");
                    assert!(folded.bits().words() == direct.bits().words(), "{scheme:?} {layout:?} / {factor}");
                    assert!(keys.iter().all(|k| folded.contains(k)));
                }
                assert!(big.folded(5).is_none() && big.folded(1).is_none(), "{scheme:?} {layout:?}");
            }
        }
        // Hadoop's and Spark's remainders fold as well (Spark's to whole words only).
        for scheme in [Scheme::Hadoop(HadoopHash::Jenkins), Scheme::Hadoop(HadoopHash::Murmur), Scheme::SparkV1, Scheme::SparkV2] {
            let filled = |bits: u64| {
                let mut filter = BloomFilter::new(FilterSpec::with_size(scheme, Layout::Standard, bits, 5, 0).unwrap());
                filter.insert_batch(&keys);
                filter
            };
            let big = filled(64 * 600);
            for factor in [2, 3, 4, 5, 6, 8] {
                let folded = big.folded(factor).expect("a factor of the size");
                let direct = filled(64 * 600 / factor);
                assert_eq!(folded.spec(), direct.spec(), "{scheme:?} / {factor}");
                assert!(folded.bits().words() == direct.bits().words(), "{scheme:?} / {factor}");
            }
            assert!(big.folded(7).is_none(), "{scheme:?}");
        }
        let spark = BloomFilter::new(FilterSpec::with_size(Scheme::SparkV2, Layout::Standard, 64 * 3, 5, 0).unwrap());
        assert!(spark.folded(2).is_none(), "96 bits: not whole words");
    }

    use super::*;

    #[test]
    fn inserted_keys_are_found_and_a_fresh_filter_is_empty() {
        let mut f = BloomFilter::with_rate(1000, 0.01).unwrap();
        assert!(!f.contains(b"x"));
        f.insert(b"x");
        assert!(f.contains(b"x"));
        f.clear();
        assert!(!f.contains(b"x"));
        assert_eq!(f.bits_set(), 0);
    }

    /// `contains` and `contains_batch` take the fastest kernel the CPU runs; `contains_probe` is
    /// the portable one. Every kernel this CPU runs must answer alike, in both paths, for every
    /// k and both native schemes, on members and non-members, and its batched insert must set
    /// the bits that inserting one key at a time sets.
    #[test]
    fn every_blocked_query_path_answers_alike() {
        let kernels: Vec<BlockKernel> = BlockKernel::ALL.into_iter().filter(|kernel| kernel.runs()).collect();
        eprintln!("kernels this CPU runs: {kernels:?}");
        for scheme in [Scheme::NativeLookup3, Scheme::Native] {
            // Up to three remixes' positions (the vector tests take 7 at a time).
            for k in 1..=17 {
                let spec = FilterSpec { hashes: k, ..FilterSpec::sized_for(scheme, Layout::Blocked, 2000, 0.05, 3).unwrap() };
                let mut f = BloomFilter::new(spec);
                let keys: Vec<Vec<u8>> = (0..6000u32).map(|i| format!("key-{i}").into_bytes()).collect();
                let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                f.insert_batch(&refs[..2000]);
                let portable: Vec<bool> = refs.iter().map(|key| f.contains_probe(&f.spec.block_probe(key))).collect();
                let positives = portable.iter().filter(|&&p| p).count();
                assert!((2000..6000).contains(&positives), "{scheme} k {k}: {positives} positives");
                let mut batched = Vec::new();
                f.contains_batch(&refs, &mut batched);
                assert_eq!(batched, portable, "{scheme} k {k}: contains_batch");
                // Whole groups only, as the jobs' batches of 1024 keys are, half of them inserted.
                f.contains_batch(&refs[1488..2512], &mut batched);
                assert_eq!(batched, portable[1488..2512], "{scheme} k {k}: contains_batch of whole groups");
                let single: Vec<bool> = refs.iter().map(|key| f.contains(key)).collect();
                assert_eq!(single, portable, "{scheme} k {k}: contains");
                let mut one_by_one = BloomFilter::new(spec);
                refs[..2000].iter().for_each(|key| one_by_one.insert(key));
                assert_eq!(one_by_one.bits, f.bits, "{scheme} k {k}: insert_batch");
                let probes: Vec<BlockProbe> = refs.iter().map(|key| spec.block_probe(key)).collect();
                for &kernel in &kernels {
                    f.clone().with_kernel(kernel).contains_probes(&probes, &mut batched);
                    assert_eq!(batched, portable, "{scheme} k {k}: contains_probes with {kernel:?}");
                    // Each kernel's batched insert sets the bits one-by-one inserts set.
                    let mut by_kernel = BloomFilter { kernel, ..BloomFilter::new(spec) };
                    by_kernel.insert_batch(&refs[..2000]);
                    assert_eq!(by_kernel.bits, f.bits, "{scheme} k {k}: insert_batch with {kernel:?}");
                    f.contains_batch_with(kernel, &refs, &mut batched);
                    assert_eq!(batched, portable, "{scheme} k {k}: contains_batch_with {kernel:?}");
                    let single: Vec<bool> = refs.iter().map(|key| f.contains_with(kernel, key)).collect();
                    assert_eq!(single, portable, "{scheme} k {k}: contains_with {kernel:?}");
                    let with_kernel = f.clone().with_kernel(kernel);
                    assert!(with_kernel.query.is(&QueryCode::new(&spec, kernel)), "{scheme} k {k}: the query code of {kernel:?}");
                    let hashes: Vec<KeyHash> = refs.iter().map(|key| spec.key_hash(key).unwrap()).collect();
                    let hashed: Vec<bool> = hashes.iter().map(|&hash| with_kernel.contains_hash(hash)).collect();
                    assert_eq!(hashed, portable, "{scheme} k {k}: contains_hash with {kernel:?}");
                    with_kernel.contains_hashes(&hashes, &mut batched);
                    assert_eq!(batched, portable, "{scheme} k {k}: contains_hashes with {kernel:?}");
                }
            }
        }
    }

    /// A key hashed once stands for it in every filter of its scheme and seed: `insert_hash`
    /// sets the bits `insert` sets and `contains_hash` (and `contains_hashes`, in groups of any
    /// length) answers as `contains` does, in both layouts and filters of different sizes, from
    /// one hash. A filter of another seed or scheme refuses the hash; Hadoop's and Spark's
    /// schemes make none.
    #[test]
    fn a_key_hashed_once_is_inserted_and_asked_as_its_bytes_are() {
        let keys: Vec<Vec<u8>> = (0..3000u32).map(|i| format!("hashed-{i}").into_bytes()).collect();
        for scheme in [Scheme::NativeLookup3, Scheme::Native] {
            let spec = |layout, n| FilterSpec::sized_for(scheme, layout, n, 0.02, 11).unwrap();
            let specs = [spec(Layout::Standard, 1000), spec(Layout::Standard, 700), spec(Layout::Blocked, 1000), spec(Layout::Blocked, 700)];
            let hashes: Vec<KeyHash> = keys.iter().map(|key| specs[0].key_hash(key).unwrap()).collect();
            for spec in specs {
                let (mut by_bytes, mut by_hash) = (BloomFilter::new(spec), BloomFilter::new(spec));
                keys[..1000].iter().for_each(|key| by_bytes.insert(key));
                hashes[..1000].iter().for_each(|&hash| by_hash.insert_hash(hash));
                assert_eq!((&by_hash.bits, by_hash.items_inserted), (&by_bytes.bits, 1000), "{scheme} {:?} m {}", spec.layout, spec.bits);
                let asked: Vec<bool> = keys.iter().map(|key| by_bytes.contains(key)).collect();
                let asked_by_hash: Vec<bool> = hashes.iter().map(|&hash| by_bytes.contains_hash(hash)).collect();
                assert_eq!(asked_by_hash, asked, "{scheme} {:?} m {}", spec.layout, spec.bits);
                let mut batched = vec![true; 5];
                // Batches of every kind: long, empty, of one hash, at the prefetch distance and past it.
                for (start, end) in [(0, 3000), (1000, 1000), (7, 1300), (2999, 3000), (990, 990 + PROBES_AHEAD), (990, 991 + PROBES_AHEAD)] {
                    by_bytes.contains_hashes(&hashes[start..end], &mut batched);
                    assert_eq!(batched, asked[start..end], "{scheme} {:?} m {} keys {start}..{end}", spec.layout, spec.bits);
                }
                assert!(asked[1000..].iter().any(|&maybe| !maybe), "absent keys are answered no");
            }
        }
        let native = FilterSpec::sized_for(Scheme::NativeLookup3, Layout::Blocked, 100, 0.01, 1).unwrap();
        let other_seed = BloomFilter::new(FilterSpec { seed: 2, ..native });
        let other_scheme = BloomFilter::new(FilterSpec { scheme: Scheme::Native, ..native });
        let hash = native.key_hash(b"k").unwrap();
        for (what, filter) in [("seed", other_seed), ("scheme", other_scheme)] {
            // Alone, in a short batch, and last in a batch long enough to be prefetched.
            let in_a_batch = |hash, n| filter.contains_hashes(&[vec![filter.spec().key_hash(b"own").unwrap(); n - 1], vec![hash]].concat(), &mut Vec::new());
            let (short, long) = (std::panic::catch_unwind(|| in_a_batch(hash, 1)), std::panic::catch_unwind(|| in_a_batch(hash, 3 * PROBES_AHEAD)));
            for refused in [std::panic::catch_unwind(|| filter.contains_hash(hash)), short.map(|_| true), long.map(|_| true)] {
                let refused = refused.expect_err(what);
                let message = refused.downcast_ref::<String>().expect("a formatted message");
                assert!(message.contains("a key hash of another scheme or seed"), "{what}: {message}");
            }
        }
        let hadoop = FilterSpec::with_size(Scheme::Hadoop(HadoopHash::Jenkins), Layout::Standard, 1000, 5, 0).unwrap();
        let spark = FilterSpec::with_size(Scheme::SparkV2, Layout::Standard, 1024, 5, 0).unwrap();
        assert_eq!((hadoop.key_hash(b"k"), spark.key_hash(b"k")), (None, None));
    }

    #[test]
    fn union_refuses_a_different_identity_and_names_it() {
        let mut a = BloomFilter::with_bits(1000, 7).unwrap();
        let b = BloomFilter::with_bits(1000, 6).unwrap();
        let err = a.union(&b).unwrap_err().to_string();
        assert!(err.contains("number of hashes (k)") && err.contains("7 vs 6"), "{err}");
        let c = BloomFilter::new(FilterSpec::native(1000, 7, 9).unwrap());
        assert!(a.intersect(&c).unwrap_err().to_string().contains("seed"));
        let d = BloomFilter::with_bits(1001, 7).unwrap();
        assert!(a.union(&d).unwrap_err().to_string().contains("number of bits (m)"));
    }

    #[test]
    fn filters_above_2_pow_32_bits_work() {
        let mut f = BloomFilter::with_bits(1 << 33, 3).unwrap();
        for i in 0..1000u32 {
            f.insert(&i.to_le_bytes());
        }
        assert!((0..1000u32).all(|i| f.contains(&i.to_le_bytes())));
        let high_words = f.bits().words()[(1 << 26)..].iter().filter(|&&w| w != 0).count();
        assert!(high_words > 0);
    }
}
