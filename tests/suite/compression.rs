//! Compressed inputs (`.gz`, `.zst`, `.deflate`, `.bz2`, `.snappy`, `.lz4`), read as Hadoop's
//! TextInputFormat reads them: decompressed, one split per file (bzip2 split at its blocks); other
//! codecs refused by their suffix; a damaged file an error, never a short read. And the semi-join's compressed part files. Every test runs for
//! every codec.

use crate::util::*;
use flate2::write::GzEncoder;
use std::time::Duration;
use std::io::{Read, Write};
use std::path::Path;

/// `rows` records `i,k<i>,payload` under the header `id,key,payload`, starting at `first`.
fn csv(first: usize, rows: usize, header: bool) -> Vec<u8> {
    let mut text = if header { String::from("id,key,payload\n") } else { String::new() };
    for i in first..first + rows {
        text.push_str(&format!("{i},k{i},{}\n", "p".repeat(i % 17)));
    }
    text.into_bytes()
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    encoder.include_checksum(true).unwrap();
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// Compresses a text (or decompresses one).
type Compressor = fn(&[u8]) -> Vec<u8>;

fn zlib(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn bzip2(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// A record past a bzip2 file's first block, read by a split that starts there, has no known
/// line number (the lines before it are in blocks that split never decodes): its messages say
/// so, where they printed line 0, or, for a record over the limit, its number within the split.
#[test]
fn records_in_later_bzip2_blocks_are_reported_without_a_line_number() {
    let dir = tempdir();
    let text = |bad: &str| {
        // 300 kB of text: three blocks at level 1 (100 kB each); the bad record in the third.
        let mut text = String::from("id,key\n");
        for i in 0..15_000 {
            text.push_str(&if i == 14_000 { format!("{bad}\n") } else { format!("{i},key-{i}\n") });
        }
        bzip2(text.as_bytes())
    };
    let path = dir.path().join("late.csv.bz2");
    let input = path.to_string_lossy().into_owned();
    let out = path_str(dir.path(), "late.bloom");
    let uncounted = "(in a part of the file whose lines are not counted: a bzip2 block after its first)";
    let args = ["build", &input, "-k", "key", "--expected-items", "15000", "-o", &out, "--no-progress", "-w", "2", "--split-size", "1000"];
    std::fs::write(&path, text("broken")).unwrap();
    let summary = ok(&run(&args));
    assert!(summary.contains(&format!("late.csv.bz2: record has 1 field(s), but the key is field 2 {uncounted}")), "{summary}");
    let err = fails_with(&run(&[&args[..], &["--strict"]].concat()), &[uncounted]);
    assert!(!err.contains(":0:"), "{err}");
    std::fs::write(&path, text(&format!("1,{}", "x".repeat(300)))).unwrap();
    let err = fails_with(&run(&[&args[..], &["--max-record-bytes", "200"]].concat()), &["longer than the limit of 200 bytes", uncounted]);
    assert!(err.contains("late.csv.bz2: record is longer"), "no line number: {err}");
}

/// Hadoop's block framing (`BlockCompressorStream`), written here apart from bloomflow's writer
/// and unlike it: blocks of 100 kB of text, each cut into chunks of at most 40 kB (as Hadoop cuts
/// a write larger than its buffer), and an empty text as one empty block (as Hadoop writes an
/// empty part).
fn hadoop_framed(bytes: &[u8], chunk: fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    if bytes.is_empty() {
        return 0u32.to_be_bytes().to_vec();
    }
    let mut out = Vec::new();
    for block in bytes.chunks(100_000) {
        out.extend((block.len() as u32).to_be_bytes());
        for piece in block.chunks(40_000) {
            let packed = chunk(piece);
            out.extend((packed.len() as u32).to_be_bytes());
            out.extend(packed);
        }
    }
    out
}

fn snappy(bytes: &[u8]) -> Vec<u8> {
    hadoop_framed(bytes, |piece| snap::raw::Encoder::new().compress_vec(piece).unwrap())
}

fn lz4(bytes: &[u8]) -> Vec<u8> {
    hadoop_framed(bytes, lz4_flex::block::compress)
}

/// The text of a Hadoop block-framed file; `chunk` decodes one chunk into a buffer of the
/// block's remaining length, returning its length.
fn hadoop_unframed(mut bytes: &[u8], chunk: fn(&[u8], &mut [u8]) -> usize) -> Vec<u8> {
    let mut text = Vec::new();
    let u32_at = |bytes: &mut &[u8]| {
        let (n, rest) = bytes.split_at(4);
        *bytes = rest;
        u32::from_be_bytes(n.try_into().unwrap()) as usize
    };
    while !bytes.is_empty() {
        let mut left = u32_at(&mut bytes);
        while left > 0 {
            let len = u32_at(&mut bytes);
            let mut out = vec![0; left];
            let n = chunk(&bytes[..len], &mut out);
            text.extend_from_slice(&out[..n]);
            bytes = &bytes[len..];
            left -= n;
        }
    }
    text
}

fn unsnappy(bytes: &[u8]) -> Vec<u8> {
    hadoop_unframed(bytes, |c, out| snap::raw::Decoder::new().decompress(c, out).unwrap())
}

fn unlz4(bytes: &[u8]) -> Vec<u8> {
    hadoop_unframed(bytes, |c, out| lz4_flex::block::decompress_into(c, out).unwrap())
}

/// The codecs read: file suffix, name in messages, compressor.
const CODECS: [(&str, &str, Compressor); 6] =
    [("gz", "gzip", gzip), ("zst", "zstd", zstd), ("deflate", "deflate", zlib), ("bz2", "bzip2", bzip2), ("snappy", "snappy", snappy), ("lz4", "lz4", lz4)];

/// Whether a codec checks its data: Hadoop's Snappy and LZ4 framing has no checksum, so a
/// changed byte inside a chunk's literals reads as a changed text, as it does in Hadoop.
fn checksummed(codec: &str) -> bool {
    !matches!(codec, "snappy" | "lz4")
}

/// The `lz4` tool's frame format.
fn lz4_frame(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// snzip's (and python-snappy's) framing format.
fn snappy_frame(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = snap::write::FrameEncoder::new(Vec::new());
    encoder.write_all(bytes).unwrap();
    encoder.into_inner().unwrap()
}

/// The codecs told on standard input by their magic bytes.
const MAGIC_CODECS: [(&str, &str, Compressor); 5] =
    [("gz", "gzip", gzip), ("zst", "zstd", zstd), ("bz2", "bzip2", bzip2), ("lz4", "lz4", lz4_frame), ("snappy", "snappy", snappy_frame)];

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    std::fs::write(dir.join(name), bytes).unwrap();
    path_str(dir, name)
}

fn build(dir: &Path, inputs: &[&str], name: &str, extra: &[&str]) -> (Vec<u8>, String) {
    let out = path_str(dir, name);
    let mut args = vec!["build"];
    args.extend_from_slice(inputs);
    args.extend_from_slice(&["-k", "key", "-o", &out, "--no-progress"]);
    args.extend_from_slice(extra);
    let summary = ok(&run(&args));
    (std::fs::read(&out).unwrap(), summary)
}

/// 5000 records as plain text, and the filter a build of them makes (`--expected-items 5000`).
fn plain_reference(dir: &Path) -> (Vec<u8>, Vec<u8>) {
    let text = csv(0, 5000, true);
    let plain = write(dir, "in.csv", &text);
    let (reference, _) = build(dir, &[&plain], "plain.bloom", &["--expected-items", "5000"]);
    (text, reference)
}

#[test]
fn a_compressed_file_builds_the_filter_of_its_text_for_any_workers_and_split_size() {
    let dir = tempdir();
    let (text, reference) = plain_reference(dir.path());
    for (suffix, _, compress) in CODECS {
        let packed = write(dir.path(), &format!("in.csv.{suffix}"), &compress(&text));
        for (w, split) in [("1", "1000"), ("3", "1000"), ("2", "1")] {
            let (filter, summary) = build(dir.path(), &[&packed], &format!("{suffix}{w}_{split}.bloom"), &["--expected-items", "5000", "-w", w, "--split-size", split]);
            assert!(summary.contains("records            5000"), "{summary}");
            assert!(summary.contains(&format!("bytes              {}", text.len())), "decompressed bytes are counted: {summary}");
            assert_eq!(filter, reference, ".{suffix} -w {w} --split-size {split}");
        }
    }
}

/// A pipe has no suffix: standard input is decompressed when it begins with a codec's magic bytes
/// (gzip's and zstd's: a zlib stream's first byte is an `x`, which text may begin with too).
#[test]
fn standard_input_is_decompressed_by_its_magic_bytes() {
    let dir = tempdir();
    let (text, reference) = plain_reference(dir.path());
    for (suffix, codec, compress) in MAGIC_CODECS {
        let packed = compress(&text);
        let out = path_str(dir.path(), &format!("stdin-{suffix}.bloom"));
        let summary = ok(&run_with_stdin(&["build", "-", "-k", "key", "--expected-items", "5000", "-o", &out, "--no-progress", "-w", "2"], &packed));
        assert!(summary.contains("records            5000"), "{summary}");
        assert_eq!(std::fs::read(&out).unwrap(), reference, "{codec} on standard input");
        let truncated = run_with_stdin(&["build", "-", "-k", "key", "--expected-items", "5000", "-o", &out, "--no-progress"], &packed[..packed.len() / 2]);
        fails_with(&truncated, &["<stdin>", &format!("not valid {codec} data")]);
    }
}

/// Hadoop's Snappy and LZ4 framing has no magic bytes: piped (`hadoop fs -cat part.snappy |`),
/// it is read with `--stdin-compression`, as is every other codec; `none` reads a stream that
/// begins like gzip as text. The flag is refused where nothing is read from standard input.
#[test]
fn standard_input_is_read_with_the_codec_named() {
    let dir = tempdir();
    let (text, reference) = plain_reference(dir.path());
    for (_, codec, compress) in CODECS {
        let out = path_str(dir.path(), &format!("named-{codec}.bloom"));
        let args = ["build", "-", "-k", "key", "--expected-items", "5000", "-o", &out, "--no-progress", "--stdin-compression", codec];
        let summary = ok(&run_with_stdin(&args, &compress(&text)));
        assert!(summary.contains("records            5000"), "{codec}: {summary}");
        assert_eq!(std::fs::read(&out).unwrap(), reference, "{codec} named on standard input");
    }
    // Without the flag, Hadoop-framed Snappy is not told from text (and is no filter of it).
    let guessed = path_str(dir.path(), "guessed.bloom");
    let _ = run_with_stdin(&["build", "-", "-k", "key", "--expected-items", "5000", "-o", &guessed, "--no-progress"], &snappy(&text));
    assert_ne!(std::fs::read(&guessed).ok(), Some(reference.clone()));
    // `none`: gzip's magic bytes at the start of a text are only text.
    let mut odd = vec![0x1f, 0x8b, b'\n'];
    odd.extend_from_slice(&text[text.iter().position(|&b| b == b'\n').unwrap() + 1..]);
    let header_first = [&b"id,key,note\n"[..], &odd].concat();
    let out = path_str(dir.path(), "none.bloom");
    let summary = ok(&run_with_stdin(&["build", "-", "-k", "key", "--expected-items", "5000", "-o", &out, "--no-progress", "--stdin-compression", "none"], &header_first));
    assert!(summary.contains("records            5001"), "{summary}");
    let told = run_with_stdin(&["build", "-", "-k", "key", "--expected-items", "5000", "-o", &out, "--no-progress"], &odd);
    fails_with(&told, &["<stdin>", "not valid gzip data"]);
    // Queries read their keys alike.
    let keys: String = (0..50).map(|i| format!("k{i}\n")).collect();
    let plain = path_str(dir.path(), "plain.bloom");
    let expected = ok(&run_with_stdin(&["query", &plain], keys.as_bytes()));
    assert_eq!(ok(&run_with_stdin(&["query", &plain, "--stdin-compression", "lz4"], &lz4(keys.as_bytes()))), expected);
    // Refused where no input is standard input.
    let input = path_str(dir.path(), "in.csv");
    fails_with(&run(&["build", &input, "-k", "key", "-o", &out, "--no-progress", "--stdin-compression", "gzip"]), &["--stdin-compression", "no input is `-`"]);
    fails_with(&run(&["query", &plain, "--stdin-compression", "gzip", "k1"]), &["--stdin-compression", "arguments"]);
    let joined = path_str(dir.path(), "joined");
    let args = ["semijoin", "--build", &input, "--build-key", "key", "--probe", &input, "--probe-key", "key", "-o", &joined, "--no-progress", "--stdin-compression", "lz4"];
    fails_with(&run(&args), &["--stdin-compression", "no input is `-`"]);
    assert!(!Path::new(&joined).exists());
}

/// `query` decompresses its standard input the same way.
#[test]
fn query_reads_compressed_keys_from_standard_input() {
    let dir = tempdir();
    let text = csv(0, 100, true);
    let plain = write(dir.path(), "in.csv", &text);
    let (_, _) = build(dir.path(), &[&plain], "q.bloom", &["--expected-items", "100"]);
    let filter = path_str(dir.path(), "q.bloom");
    let keys: String = (0..300).map(|i| format!("k{i}\n")).collect();
    let expected = ok(&run_with_stdin(&["query", &filter], keys.as_bytes()));
    assert_eq!(expected.lines().count(), 300);
    for (_, codec, compress) in MAGIC_CODECS {
        assert_eq!(ok(&run_with_stdin(&["query", &filter], &compress(keys.as_bytes()))), expected, "{codec}");
    }
}

/// `cat a.gz b.gz` is one valid gzip file of both texts (and the same for zstd frames); so is a
/// directory of compressed and plain files, of which an empty compressed file adds nothing.
#[test]
fn concatenated_members_and_mixed_directories_are_read_whole() {
    let dir = tempdir();
    let (first, second) = (csv(0, 3000, true), csv(3000, 4000, false));
    let all = write(dir.path(), "all.csv", &[first.clone(), second.clone()].concat());
    let (reference, _) = build(dir.path(), &[&all], "all.bloom", &["--expected-items", "7000"]);
    for (suffix, _, compress) in CODECS {
        let members = write(dir.path(), &format!("members.csv.{suffix}"), &[compress(&first), compress(&second)].concat());
        let (filter, summary) = build(dir.path(), &[&members], &format!("members-{suffix}.bloom"), &["--expected-items", "7000", "-w", "2"]);
        assert!(summary.contains("records            7000"), "{summary}");
        assert_eq!(filter, reference, "two .{suffix} members");

        let mixed = dir.path().join(format!("mixed-{suffix}"));
        std::fs::create_dir(&mixed).unwrap();
        write(&mixed, &format!("a.csv.{suffix}"), &compress(&first));
        write(&mixed, "b.csv", &[b"id,key,payload\n".as_slice(), &second].concat());
        write(&mixed, &format!("c.csv.{}", suffix.to_uppercase()), &compress(b""));
        let dir_arg = mixed.to_string_lossy().into_owned();
        let (filter, summary) = build(dir.path(), &[&dir_arg], &format!("mixed-{suffix}.bloom"), &["--expected-items", "7000", "-w", "3", "--split-size", "4096"]);
        assert!(summary.contains("records            7000"), "{summary}");
        assert_eq!(filter, reference, ".{suffix} and plain files in one directory");
    }
}

/// Two processes over a directory of plain files and files of every codec (each process plans
/// the same splits: a compressed file is claimed whole, a bzip2 file in splits of its blocks)
/// build one worker's filter, byte for byte.
#[test]
fn processes_over_compressed_files_build_the_same_filter() {
    let dir = tempdir();
    let inputs = dir.path().join("inputs");
    std::fs::create_dir(&inputs).unwrap();
    let mut first = 0;
    let sizes = [4000, 2500, 6000, 3000, 5000, 3500, 2000];
    for (i, rows) in sizes.into_iter().enumerate() {
        let text = csv(first, rows, true);
        first += rows;
        match CODECS.get(i) {
            Some((suffix, _, compress)) => write(&inputs, &format!("{i}.csv.{suffix}"), &compress(&text)),
            None => write(&inputs, &format!("{i}.csv"), &text),
        };
    }
    // A bzip2 file of many blocks, which the split size below cuts into several splits.
    let blocky = blocky_csv(30_000);
    let blocky_rows = 30_000;
    write(&inputs, "blocky.csv.bz2", &bzip2(&blocky));
    let records = sizes.iter().sum::<usize>() + blocky_rows;
    let input = path_str(dir.path(), "inputs");
    let (reference, _) = build(dir.path(), &[&input], "one.bloom", &["--expected-items", "60000"]);
    for (processes, workers) in [(2, 1), (2, 2)] {
        let out = path_str(dir.path(), &format!("c{processes}x{workers}.bloom"));
        let args = ["build", &input, "-k", "key", "--expected-items", "60000", "-o", &out, "--split-size", "20000", "--no-progress"];
        let outs = run_cluster(dir.path(), processes, workers, &args, Duration::from_secs(60));
        let summary = ok(&outs[0]);
        assert!(summary.contains(&format!("records            {records}")), "{summary}");
        outs[1..].iter().for_each(|o| drop(ok(o)));
        assert_eq!(std::fs::read(&out).unwrap(), reference, "{processes} x {workers}");
    }
}

/// Without --expected-items the size is estimated from the input bytes: a compressed file must
/// count as its text, not as its (here several times smaller) compressed bytes.
#[test]
fn the_estimate_counts_a_compressed_file_as_its_text() {
    let dir = tempdir();
    let text = csv(0, 60_000, true);
    for (suffix, codec, compress) in CODECS {
        let packed = compress(&text);
        assert!(packed.len() * 2 < text.len(), "the test needs a compressible text: {suffix} {} of {}", packed.len(), text.len());
        let input = write(dir.path(), &format!("in.csv.{suffix}"), &packed);
        let (_, summary) = build(dir.path(), &[&input], &format!("est-{suffix}.bloom"), &[]);
        let estimated = estimated_keys(&summary);
        assert!((60_000..=60_000 * 2).contains(&estimated), "estimated {estimated} keys for 60000: {summary}");
        assert!(summary.contains(&format!("{codec} files at")), "{summary}");
    }
}

/// The size estimated for 32 gzip files of 1000 records `{key},k{key},{payload}` each, where
/// `payload(file, key)`: the keys, and the build's summary, checked to be sized for them all.
fn estimate_of_gzip_parts(payload: impl Fn(u64, u64) -> String) -> (u64, String) {
    let dir = tempdir();
    let mut inputs = Vec::new();
    let mut keys = 0u64;
    for file in 0..32 {
        let mut text = String::from("id,key,payload\n");
        for _ in 0..1000 {
            text.push_str(&format!("{keys},k{keys},{}\n", payload(file, keys)));
            keys += 1;
        }
        inputs.push(write(dir.path(), &format!("part-{file:05}.csv.gz"), &gzip(text.as_bytes())));
    }
    let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
    let (_, summary) = build(dir.path(), &inputs, "est.bloom", &[]);
    let estimated = estimated_keys(&summary);
    assert!((keys..=keys * 2).contains(&estimated), "estimated {estimated} keys for {keys}: {summary}");
    (keys, summary)
}

/// The compressed files of an estimate are sampled spread over their list, not the first few:
/// of 32 gzip files whose first 16 hold records five times the length of the rest's, the
/// first 16 alone sized the filter for 23,285 of its 32,000 keys (now 37,675).
#[test]
fn the_estimate_samples_compressed_files_over_their_list() {
    estimate_of_gzip_parts(|file, key| {
        let hex: usize = if file < 16 { 80 } else { 8 };
        let payload: String = (0..hex / 16).map(|j| format!("{:016x}", splitmix64(key * 8 + j as u64))).chain([format!("{:08x}", splitmix64(!key) >> 32)]).collect();
        payload[..hex].to_string()
    });
}

/// A codec's expansion is pooled over the files of it sampled, not measured on its first
/// file: of 32 gzip files whose first holds random payloads (about 2× smaller compressed) and
/// the rest runs of one letter (over 10×), the first file's ratio sized the filter for 5,091
/// of the 32,000 keys (now 33,013).
#[test]
fn the_estimate_pools_a_codecs_expansion_over_its_files() {
    let (_, summary) = estimate_of_gzip_parts(|file, key| match file {
        0 => (0..5).map(|j| format!("{:016x}", splitmix64(key * 8 + j))).collect(),
        _ => "a".repeat(80),
    });
    assert!(summary.contains("measured on 16 of them"), "{summary}");
}

/// A bzip2 file of 900 kB blocks (`bzip2 -9`, the tool's default) counts as its text too,
/// though its decoder returns no text of a block before it has read all of it: the sample,
/// which ends inside the second block, counts all of that block's text. Counted as the sample's
/// text over every compressed byte read for it, the file counted as half its text, and the
/// filter, sized for too few keys, missed its rate (see the undersized warning's test).
#[test]
fn the_estimate_of_a_bzip2_file_of_large_blocks_counts_its_whole_text() {
    let dir = tempdir();
    // Rows of random hex, which compress about as the benchmark's probe does (2.5 times): a
    // text of runs, as `csv` writes, fits more than the sample in one block.
    let text: Vec<u8> = std::iter::once("id,key,payload\n".to_string())
        .chain((0..100_000u64).map(|i| format!("{i},k{i},{:016x}{:08x}\n", splitmix64(i), splitmix64(!i) >> 32)))
        .collect::<String>()
        .into_bytes();
    let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    encoder.write_all(&text).unwrap();
    let packed = encoder.finish().unwrap();
    assert!(text.len() > 3 << 20 && packed.len() * 2 < text.len(), "several blocks, compressed: {} bytes, {}", text.len(), packed.len());
    let input = write(dir.path(), "in.csv.bz2", &packed);
    let stats = dir.path().join("est.json");
    let o = run(&["build", &input, "-k", "key", "-o", &path_str(dir.path(), "est.bloom"), "--no-progress", "--stats-json", stats.to_str().unwrap()]);
    ok(&o);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("warning"), "{}", String::from_utf8_lossy(&o.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    let estimated = stats["expected_items"].as_u64().unwrap();
    assert!((100_000..=100_000 * 2).contains(&estimated), "estimated {estimated} keys for 100000: {}", stats["sizing"]);
    assert!(stats["estimated_fpp"].as_f64().unwrap() <= 0.01, "{stats}");
}

#[test]
fn semijoin_reads_compressed_files_on_both_sides() {
    let dir = tempdir();
    let build_text = csv(0, 2000, true);
    let probe_text: Vec<u8> = {
        let mut t = String::from("event,key\n");
        for i in 0..10_000 {
            t.push_str(&format!("{i},k{}\n", (i * 7) % 5000));
        }
        t.into_bytes()
    };
    let (b, p) = (write(dir.path(), "b.csv", &build_text), write(dir.path(), "p.csv", &probe_text));
    let (bg, pz) = (write(dir.path(), "b.csv.gz", &gzip(&build_text)), write(dir.path(), "p.csv.zst", &zstd(&probe_text)));
    let mut outputs = Vec::new();
    for (build, probe, out) in [(&b, &p, "plain-out"), (&bg, &pz, "compressed-out")] {
        let out = path_str(dir.path(), out);
        ok(&run(&["semijoin", "--build", build, "--build-key", "key", "--probe", probe, "--probe-key", "key", "-o", &out, "--exact", "-w", "2", "--no-progress"]));
        let mut lines: Vec<String> = Vec::new();
        for entry in std::fs::read_dir(&out).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().unwrap().to_string_lossy().starts_with("part-") {
                lines.extend(std::fs::read_to_string(path).unwrap().lines().filter(|l| !l.starts_with("event,")).map(String::from));
            }
        }
        lines.sort();
        outputs.push(lines);
    }
    // Keys k0..k1999 are on the build side: probe rows with (7i mod 5000) < 2000.
    let expected = (0..10_000).filter(|i| (i * 7) % 5000 < 2000).count();
    assert_eq!(outputs[0].len(), expected);
    assert_eq!(outputs[0], outputs[1]);
}

#[test]
fn a_damaged_compressed_file_fails_naming_it_and_writes_nothing() {
    let dir = tempdir();
    for (suffix, codec, compress) in CODECS {
        let packed = compress(&csv(0, 20_000, true));
        let truncated = write(dir.path(), &format!("truncated.csv.{suffix}"), &packed[..packed.len() / 2]);
        let mut flipped = packed.clone();
        if checksummed(codec) {
            let middle = flipped.len() / 2;
            flipped[middle] ^= 0xff;
        } else {
            // The first chunk's length, beyond the file's end.
            flipped[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        }
        let corrupt = write(dir.path(), &format!("corrupt.csv.{suffix}"), &flipped);
        let not_compressed = write(dir.path(), &format!("text.csv.{suffix}"), &csv(0, 100, true));
        for input in [&truncated, &corrupt, &not_compressed] {
            let name = Path::new(input).file_name().unwrap().to_string_lossy().into_owned();
            let out = path_str(dir.path(), "damaged.bloom");
            fails_with(&run(&["build", input, "-k", "key", "--expected-items", "100", "-o", &out, "--no-progress", "-w", "2"]), &[&name, &format!("not valid {codec} data")]);
            assert!(!Path::new(&out).exists(), "{name}: no filter may be written");
        }
    }
}

/// Without --expected-items the estimate samples a compressed file first: a damaged one fails
/// there, named, before any worker starts.
#[test]
fn the_estimate_over_a_damaged_compressed_file_fails_naming_it() {
    let dir = tempdir();
    for (suffix, codec, compress) in CODECS {
        let packed = compress(&csv(0, 5000, true));
        let name = format!("cut.csv.{suffix}");
        let input = write(dir.path(), &name, &packed[..packed.len() / 2]);
        let out = path_str(dir.path(), "cut.bloom");
        fails_with(&run(&["build", &input, "-k", "key", "-o", &out, "--no-progress"]), &[&name, &format!("not valid {codec} data")]);
        assert!(!Path::new(&out).exists());
    }
}

/// A semi-join whose probe file is damaged fails and leaves no output that looks complete.
#[test]
fn a_semijoin_over_a_damaged_compressed_probe_leaves_no_output() {
    let dir = tempdir();
    let build = write(dir.path(), "b.csv", &csv(0, 500, true));
    let packed = gzip(&csv(0, 20_000, true));
    let probe = write(dir.path(), "p.csv.gz", &packed[..packed.len() * 3 / 4]);
    let out = path_str(dir.path(), "out");
    for exact in [false, true] {
        let mut args = vec!["semijoin", "--build", &build, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &out, "-w", "2", "--no-progress", "--overwrite"];
        if exact {
            args.push("--exact");
        }
        fails_with(&run(&args), &["p.csv.gz", "not valid gzip data"]);
        assert!(!Path::new(&out).join("_SUCCESS").exists(), "exact: {exact}");
        let parts = std::fs::read_dir(&out).map(|d| d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("part-")).count()).unwrap_or(0);
        assert_eq!(parts, 0, "no part file is left (exact: {exact})");
    }
}

/// A `.lz4` file in the `lz4` tool's frame format and a `.snappy` file in snzip's framing format
/// (told by their first bytes) build the filter of their text too, concatenated frames and
/// streams included; cut short, they fail naming the file.
#[test]
fn the_codecs_own_framings_are_read_too() {
    let dir = tempdir();
    let (text, reference) = plain_reference(dir.path());
    let half = text.len() / 2 + 3;
    let files = [
        ("tool.csv.lz4", [lz4_frame(&text[..half]), lz4_frame(&text[half..])].concat(), "lz4"),
        ("snzip.csv.snappy", [snappy_frame(&text[..half]), snappy_frame(&text[half..])].concat(), "snappy"),
    ];
    for (name, bytes, codec) in files {
        let input = write(dir.path(), name, &bytes);
        let (filter, summary) = build(dir.path(), &[&input], &format!("{name}.bloom"), &["--expected-items", "5000", "-w", "2"]);
        assert!(summary.contains("records            5000"), "{summary}");
        assert_eq!(filter, reference, "{name}");
        let cut = write(dir.path(), &format!("cut-{name}"), &bytes[..bytes.len() * 3 / 4]);
        let out = path_str(dir.path(), "cut.bloom");
        fails_with(&run(&["build", &cut, "-k", "key", "--expected-items", "10", "-o", &out, "--no-progress"]), &[&format!("cut-{name}"), &format!("not valid {codec} data")]);
    }
}

#[test]
fn other_codecs_are_refused_by_their_suffix() {
    let dir = tempdir();
    for (name, codec) in [("in.csv.lzo", "LZO"), ("in.csv.xz", "xz"), ("in.csv.br", "Brotli")] {
        let input = write(dir.path(), name, &csv(0, 10, true));
        let out = path_str(dir.path(), "x.bloom");
        fails_with(&run(&["build", &input, "-k", "key", "--expected-items", "10", "-o", &out, "--no-progress"]), &[name, codec, "cannot read"]);
    }

}

/// `--compress` writes part-NNNNN.gz, .zst, .deflate, .bz2, .snappy or .lz4 files whose text is the plain run's output, for the
/// Bloom-only join and both exact strategies (the shuffle also writes a temporary file, which
/// stays plain), and bloomflow reads such a directory back as input.
#[test]
fn semijoin_writes_compressed_parts_holding_the_plain_output() {
    let dir = tempdir();
    let build = write(dir.path(), "b.csv", &csv(0, 3000, true));
    let probe_text: Vec<u8> = {
        let mut t = String::from("event,key\n");
        for i in 0..20_000 {
            t.push_str(&format!("{i},k{}\n", (i * 13) % 9000));
        }
        t.into_bytes()
    };
    let probe = write(dir.path(), "p.csv", &probe_text);
    let decoders: [(&str, &str, Compressor); 7] = [
        ("none", "", |b| b.to_vec()),
        ("gzip", ".gz", gunzip),
        ("zstd", ".zst", unzstd),
        ("deflate", ".deflate", unzlib),
        ("bzip2", ".bz2", unbzip2),
        ("snappy", ".snappy", unsnappy),
        ("lz4", ".lz4", unlz4),
    ];
    for extra in [vec![], vec!["--exact", "--exact-strategy", "broadcast"], vec!["--exact", "--exact-strategy", "shuffle"]] {
        let mut outputs = Vec::new();
        for (codec, suffix, decode) in decoders {
            let out = path_str(dir.path(), &format!("out-{codec}"));
            let mut args = vec!["semijoin", "--build", &build, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &out, "-w", "2", "--split-size", "50000", "--no-progress", "--overwrite", "--compress", codec];
            args.extend(extra.iter().copied());
            ok(&run(&args));
            let success = std::fs::read_to_string(Path::new(&out).join("_SUCCESS")).unwrap();
            assert!(success.contains(&format!("\"output_compression\": \"{codec}\"")), "{success}");
            let mut names: Vec<String> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("part-")).collect();
            names.sort();
            assert_eq!(names, [format!("part-00000{suffix}"), format!("part-00001{suffix}")], "{codec} {extra:?}");
            let mut lines: Vec<String> = Vec::new();
            for name in &names {
                let text = String::from_utf8(decode(&std::fs::read(Path::new(&out).join(name)).unwrap())).unwrap();
                lines.extend(text.lines().filter(|l| !l.starts_with("event,")).map(String::from));
            }
            lines.sort();
            // Read back as input, the directory gives the same records.
            let (_, summary) = build_with_key(dir.path(), &out, "1", &format!("back-{codec}.bloom"));
            assert!(summary.contains(&format!("records            {}", lines.len())), "{codec} {extra:?}: {summary}");
            outputs.push(lines);
        }
        assert!(!outputs[0].is_empty());
        for ((codec, _, _), output) in decoders.iter().zip(&outputs).skip(1) {
            assert_eq!(output, &outputs[0], "{codec} {extra:?}");
        }
    }
}

/// `--compress-level` changes the bytes, not the text; a level outside the codec's range, or one
/// without a codec, is refused before anything is written.
#[test]
fn a_compression_level_changes_the_bytes_not_the_text() {
    let dir = tempdir();
    let build = write(dir.path(), "b.csv", &csv(0, 3000, true));
    let probe = write(dir.path(), "p.csv", &csv(0, 20_000, true));
    let parts = |codec: &str, level: Option<&str>| -> Vec<u8> {
        let out = path_str(dir.path(), &format!("out-{codec}-{}", level.unwrap_or("usual")));
        let mut args = vec!["semijoin", "--build", &build, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &out, "--no-progress", "--compress", codec];
        if let Some(level) = level {
            args.extend(["--compress-level", level]);
        }
        ok(&run(&args));
        std::fs::read(Path::new(&out).join(format!("part-00000{}", if codec == "gzip" { ".gz" } else { ".zst" }))).unwrap()
    };
    let (usual, fast) = (parts("gzip", None), parts("gzip", Some("1")));
    assert_ne!(usual, fast);
    assert_eq!(gunzip(&usual), gunzip(&fast));
    let (usual, small) = (parts("zstd", None), parts("zstd", Some("19")));
    assert_ne!(usual, small);
    assert_eq!(unzstd(&usual), unzstd(&small));
    assert_eq!(unzstd(&usual), gunzip(&fast));
    let out = path_str(dir.path(), "refused");
    let base = ["semijoin", "--build", &build, "--build-key", "key", "--probe", &probe, "--probe-key", "key", "-o", &out, "--no-progress"];
    fails_with(&run(&[&base[..], &["--compress", "gzip", "--compress-level", "10"]].concat()), &["compression level", "0–9 for gzip"]);
    fails_with(&run(&[&base[..], &["--compress", "zstd", "--compress-level", "0"]].concat()), &["compression level", "1–22 for zstd"]);
    fails_with(&run(&[&base[..], &["--compress", "none", "--compress-level", "3"]].concat()), &["without a codec"]);
    fails_with(&run(&[&base[..], &["--compress", "snappy", "--compress-level", "3"]].concat()), &["compression level", "snappy has no levels"]);
    assert!(!Path::new(&out).exists());
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes).read_to_end(&mut text).unwrap();
    text
}

fn unzstd(bytes: &[u8]) -> Vec<u8> {
    zstd::decode_all(bytes).unwrap()
}

fn unbzip2(bytes: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    bzip2::read::MultiBzDecoder::new(bytes).read_to_end(&mut text).unwrap();
    text
}

fn unzlib(bytes: &[u8]) -> Vec<u8> {
    let mut text = Vec::new();
    flate2::read::ZlibDecoder::new(bytes).read_to_end(&mut text).unwrap();
    text
}

/// Builds a filter of `input` keyed on field `key` (any filter: the summary is what is read).
fn build_with_key(dir: &Path, input: &str, key: &str, name: &str) -> (Vec<u8>, String) {
    let out = path_str(dir, name);
    let summary = ok(&run(&["build", input, "-k", key, "-o", &out, "--no-progress", "--expected-items", "100000"]));
    (std::fs::read(&out).unwrap(), summary)
}

/// A text of `rows` records with pseudo-random payloads (so that bzip2 makes many blocks of it),
/// every 5000th record 250 kB long: longer than a block at `bzip2 -1`.
fn blocky_csv(rows: u64) -> Vec<u8> {
    let mut text = b"id,key,payload\n".to_vec();
    for i in 0..rows {
        let len = if i % 5000 == 17 { 250_000 } else { (i % 40) as usize };
        let payload: String = (0..len as u64).map(|j| char::from(b'a' + (splitmix64(i << 20 | j) % 26) as u8)).collect();
        text.extend_from_slice(format!("{i},k{i},{payload}\n").as_bytes());
    }
    text
}

/// A bzip2 file is cut into splits at the blocks that start in each, as Hadoop cuts it: files
/// of many blocks (one stream, or several concatenated with an empty one between, as pbzip2
/// writes), with records longer than a block, build the filter of their text for any worker
/// count and split size, every record read once; the semi-join keeps their records in their
/// order; a damaged block fails the job, naming the file, whichever split it is in.
#[test]
fn bzip2_files_are_read_in_splits_of_their_blocks() {
    let dir = tempdir();
    let text = blocky_csv(30_000);
    let plain = write(dir.path(), "plain.csv", &text);
    let (reference, _) = build(dir.path(), &[&plain], "plain.bloom", &["--expected-items", "30000"]);
    let one = bzip2(&text);
    // Streams cut mid-line, and an empty one.
    let cut = text.len() / 3 + 11;
    let concatenated = [bzip2(&text[..cut]), bzip2(b""), bzip2(&text[cut..])].concat();
    // Streams cut right after a newline: a split's text then ends where a record starts, which
    // is the split's (and not the next one's) to read.
    let mut lined = Vec::new();
    let mut from = 0;
    for piece in 1..=30 {
        let to = if piece == 30 { text.len() } else { from + memchr::memchr(b'\n', &text[(text.len() * piece / 30)..]).unwrap() + (text.len() * piece / 30 - from) + 1 };
        lined.extend(bzip2(&text[from..to]));
        from = to;
    }
    assert!(one.len() > 200_000, "{} bytes: too few blocks to split", one.len());
    for (name, bytes) in [("one.csv.bz2", &one), ("cat.csv.bz2", &concatenated), ("lined.csv.bz2", &lined)] {
        let input = write(dir.path(), name, bytes);
        for (w, split) in [("1", "67108864"), ("2", "20000"), ("3", "7777"), ("2", "100003")] {
            let (filter, summary) = build(dir.path(), &[&input], &format!("{name}-{w}-{split}.bloom"), &["--expected-items", "30000", "-w", w, "--split-size", split]);
            assert!(summary.contains("records            30000"), "{name} -w {w} --split-size {split}: {summary}");
            assert!(summary.contains(&format!("bytes              {}", text.len())), "{name} -w {w} --split-size {split}: {summary}");
            assert!(filter == reference, "{name} -w {w} --split-size {split}: not the filter of the text");
        }
    }

    // The semi-join's output is the plain probe's, record for record, each part in input order.
    let build_side = write(dir.path(), "keys.csv", b"key\nk3\nk17\nk5017\nk29999\nk12345\n");
    let probe = path_str(dir.path(), "one.csv.bz2");
    let joined = |probe: &str, name: &str| -> Vec<Vec<u8>> {
        let out = path_str(dir.path(), name);
        ok(&run(&["semijoin", "--build", &build_side, "--build-key", "key", "--probe", probe, "--probe-key", "key", "--exact", "-w", "3", "--split-size", "20000", "-o", &out, "--no-progress"]));
        let mut parts: Vec<_> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("part-")).collect();
        parts.sort();
        let mut records: Vec<Vec<u8>> = Vec::new();
        for part in parts {
            let bytes = std::fs::read(part).unwrap();
            let ids: Vec<u64> = bytes[b"id,key,payload\n".len()..].split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(|l| {
                records.push(l.to_vec());
                String::from_utf8_lossy(l.split(|&b| b == b',').next().unwrap()).parse().unwrap()
            }).collect();
            assert!(ids.windows(2).all(|p| p[0] < p[1]), "{name}: a part's records out of input order: {ids:?}");
        }
        records.sort();
        records
    };
    let from_bzip2 = joined(&probe, "joined-bz2");
    assert_eq!(from_bzip2.len(), 5);
    assert!(from_bzip2 == joined(&plain, "joined-plain"), "the semi-join of the bzip2 probe differs from the plain one's");

    // A damaged block, in the first, a middle or the last split.
    for at in [one.len() / 10, one.len() / 2, one.len() - 100] {
        let mut damaged = one.clone();
        damaged[at] ^= 0x55;
        let name = format!("damaged-{at}.csv.bz2");
        let input = write(dir.path(), &name, &damaged);
        let out = path_str(dir.path(), "damaged.bloom");
        fails_with(&run(&["build", &input, "-k", "key", "--expected-items", "30000", "-o", &out, "-w", "2", "--split-size", "20000", "--no-progress"]), &[&name, "not valid bzip2 data"]);
        assert!(!Path::new(&out).exists());
    }
}
