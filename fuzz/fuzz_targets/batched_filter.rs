//! The batched paths of the blocked layout: for any group of keys (slices of the input, so that
//! some end at its last byte) and any k, every kernel the CPU runs must set the bits that
//! inserting one key at a time sets, answer as single-key queries do (of keys or of their
//! probes computed first), and its wide hashes must
//! equal the scalar lookup3. The standard layout's batches likewise, for every scheme and every
//! kernel the CPU runs (Hadoop's and Spark's hash in lanes with a vector kernel only).
#![no_main]
use bloomflow::hashing::{lookup3, BlockKernel, HadoopHash, Pairs, Scheme, GROUP};
use bloomflow::{BloomFilter, FilterSpec, Layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&header, text)) = data.split_first() else { return };
    let k = 1 + header as u32 % 20;
    // Keys: the input cut at every 0xFF byte (the cuts themselves dropped), at most 3 groups.
    let keys: Vec<&[u8]> = text.split(|&b| b == 0xFF).take(3 * GROUP).collect();

    for group in keys.chunks(GROUP) {
        let want: Vec<(u32, u32)> = group.iter().map(|key| lookup3::hashlittle2(key, 5, 0)).collect();
        #[cfg(target_arch = "x86_64")]
        {
            let mut got = Pairs::default();
            if bloomflow::hashing::lookup3_x16::available() {
                // SAFETY: the CPU has what the wide hash needs (checked).
                unsafe { bloomflow::hashing::lookup3_x16::hashlittle2_wide(group, 5, &mut got) };
                assert!(group.iter().enumerate().all(|(i, _)| (got.c[i], got.b[i]) == want[i]), "lookup3_x16");
            }
            if bloomflow::hashing::lookup3_x8::available() {
                // SAFETY: as above.
                unsafe { bloomflow::hashing::lookup3_x8::hashlittle2_wide(group, 5, &mut got) };
                assert!(group.iter().enumerate().all(|(i, _)| (got.c[i], got.b[i]) == want[i]), "lookup3_x8");
            }
        }
    }

    let spec = FilterSpec::with_layout(Scheme::NativeLookup3, Layout::Blocked, 5, 8 * 512, k).unwrap();
    let mut one_by_one = BloomFilter::new(spec);
    keys.iter().for_each(|key| one_by_one.insert(key));
    let kernels: Vec<BlockKernel> = BlockKernel::ALL.into_iter().filter(|kernel| kernel.runs()).collect();
    for &kernel in &kernels {
        let mut batched = BloomFilter::new(spec).with_kernel(kernel);
        batched.insert_batch(&keys);
        assert_eq!(one_by_one.bits(), batched.bits(), "insert_batch {kernel:?}");
    }
    // The filter every kernel's batches made, as the asserts above found.
    let filter = one_by_one;
    let single: Vec<bool> = keys.iter().map(|key| filter.contains(key)).collect();
    assert!(single.iter().all(|&yes| yes), "a false negative");
    // Queries of other keys: the keys shifted by one byte.
    let others: Vec<&[u8]> = keys.iter().filter(|key| !key.is_empty()).map(|key| &key[1..]).collect();
    let expected: Vec<bool> = others.iter().map(|key| filter.contains(key)).collect();
    let mut answers = Vec::new();
    for kernel in BlockKernel::ALL {
        filter.contains_batch_with(kernel, &others, &mut answers);
        assert_eq!(answers, expected, "contains_batch_with {kernel:?}");
    }
    // The same keys' probes computed first, as a counting filter's batched count computes them
    // for `subtract`'s check.
    let probes: Vec<_> = others.iter().map(|key| spec.block_probe(key)).collect();
    for &kernel in &kernels {
        filter.clone().with_kernel(kernel).contains_probes(&probes, &mut answers);
        assert_eq!(answers, expected, "contains_probes {kernel:?}");
    }

    // The standard layout, in a filter small enough that some keys are false positives.
    let schemes = [Scheme::Native, Scheme::NativeLookup3, Scheme::Hadoop(HadoopHash::Jenkins), Scheme::Hadoop(HadoopHash::Murmur), Scheme::SparkV1, Scheme::SparkV2];
    for scheme in schemes {
        // Hadoop refuses empty keys before they reach a filter.
        let usable = |key: &&[u8]| !(key.is_empty() && scheme.refuses_empty_keys());
        let keys: Vec<&[u8]> = keys.iter().copied().filter(usable).collect();
        let others: Vec<&[u8]> = others.iter().copied().filter(usable).collect();
        let spec = FilterSpec::new(scheme, 0, 64 * 8, k).unwrap();
        let mut one_by_one = BloomFilter::new(spec);
        keys.iter().for_each(|key| one_by_one.insert(key));
        let asked: Vec<&[u8]> = others.iter().chain(&keys).copied().collect();
        let expected: Vec<bool> = asked.iter().map(|key| one_by_one.contains(key)).collect();
        for &kernel in &kernels {
            let mut batched = BloomFilter::new(spec).with_kernel(kernel);
            batched.insert_batch(&keys);
            assert_eq!(one_by_one.bits(), batched.bits(), "insert_batch {scheme:?} {kernel:?}");
            batched.contains_batch(&asked, &mut answers);
            assert_eq!(answers, expected, "contains_batch {scheme:?} {kernel:?}");
        }
    }
});
