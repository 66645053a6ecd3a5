//! Compressed files: an input's codec told by its suffix (gzip, zstd, deflate, bzip2, and Hadoop's
//! framed Snappy and LZ4), and its decoder (a gzip, zstd, deflate, Snappy or LZ4 file cannot be
//! read from its middle, so it is one split, see
//! `splits::plan_splits`, read whole by one worker; a bzip2 file is split at its blocks, see
//! `bzip2_blocks`); the suffix of a compressed output.

use crate::error::{Error, Result};
use crate::hadoop_blocks::{self, BlockCodec, HadoopBlockReader};
use crate::splits::{SplitReader, TextStart, READ_SIZE};
use flate2::bufread::{MultiGzDecoder, ZlibDecoder};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How an input file is compressed, told by its name's suffix, as Hadoop's codec factory tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    /// `.gz`: read through a gzip decoder (concatenated members too, as `cat a.gz b.gz` makes).
    Gzip,
    /// `.zst` or `.zstd`: read through a zstd decoder (concatenated frames too). About 2.5 times
    /// as fast to read as gzip.
    Zstd,
    /// `.deflate`: zlib streams, as Hadoop's DefaultCodec writes them (the codec a job uses when
    /// output compression is on and no codec is named).
    Deflate,
    /// `.bz2`: bzip2 streams (concatenated ones too, as pbzip2 and lbzip2 write), as Hadoop's
    /// BZip2Codec writes them. Slow to read: about a tenth of gzip's speed.
    Bzip2,
    /// `.snappy`: raw Snappy blocks in Hadoop's block framing, as its SnappyCodec writes them
    /// (Hive and Spark text output too; see `hadoop_blocks`), or the Snappy framing format of
    /// snzip and python-snappy, told by its first bytes. Written in Hadoop's framing.
    Snappy,
    /// `.lz4`: raw LZ4 blocks in Hadoop's block framing, as its Lz4Codec writes them, or the
    /// `lz4` tool's frame format, told by its first bytes. Written in Hadoop's framing.
    Lz4,
}

/// Suffixes of compression formats bloomflow does not read: such a file is refused, because read
/// as text it would yield garbage keys.
const UNREADABLE_CODECS: [(&str, &str); 3] = [
    ("xz", "xz"),
    ("lzo", "LZO"),
    ("br", "Brotli"),
];

impl Compression {
    /// The compression of `path`, by its suffix (case ignored): `.gz` is gzip, `.zst` and `.zstd`
    /// zstd, `.deflate` zlib, `.bz2` bzip2, `.snappy` and `.lz4` Hadoop's framed Snappy and LZ4, the
    /// suffixes of other codecs are an error, anything else is plain text.
    pub fn of(path: &Path) -> Result<Compression> {
        let suffix = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
        match suffix.as_str() {
            "gz" => return Ok(Compression::Gzip),
            "zst" | "zstd" => return Ok(Compression::Zstd),
            "deflate" => return Ok(Compression::Deflate),
            "bz2" => return Ok(Compression::Bzip2),
            "snappy" => return Ok(Compression::Snappy),
            "lz4" => return Ok(Compression::Lz4),
            _ => {}
        }
        match UNREADABLE_CODECS.iter().find(|(s, _)| *s == suffix) {
            Some((_, codec)) => Err(Error::io(
                path,
                std::io::Error::other(format!(
                    "compressed with {codec} (by its suffix), which bloomflow cannot read: decompress it, or compress it with gzip or zstd"
                )),
            )),
            None => Ok(Compression::None),
        }
    }

    /// Whether a file of this codec is cut into splits, as plain text is: bzip2's blocks can be
    /// found and decoded from the middle of a file (`bzip2_blocks`); the other codecs' streams
    /// must be read from their start.
    pub fn splittable(self) -> bool {
        matches!(self, Compression::None | Compression::Bzip2)
    }

    /// Every codec bloomflow reads.
    pub const CODECS: [Compression; 6] =
        [Compression::Gzip, Compression::Zstd, Compression::Deflate, Compression::Bzip2, Compression::Snappy, Compression::Lz4];

    /// The suffix of a file written with this compression: `.gz`, `.zst`, or none.
    pub fn suffix(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
            Compression::Deflate => ".deflate",
            Compression::Bzip2 => ".bz2",
            Compression::Snappy => ".snappy",
            Compression::Lz4 => ".lz4",
        }
    }

    /// The codec's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Deflate => "deflate",
            Compression::Bzip2 => "bzip2",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
        }
    }
}

/// How output files are written: a codec, and its level (`None`: the codec's usual one, 6 for
/// gzip and deflate, 3 for zstd, 9 for bzip2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputCompression {
    pub codec: Compression,
    pub level: Option<i32>,
}

impl OutputCompression {
    /// Uncompressed output.
    pub const NONE: OutputCompression = OutputCompression { codec: Compression::None, level: None };

    /// `codec` at `level`, which must be in the codec's range: 0–9 for gzip and deflate (zlib's
    /// levels), 1–22 for zstd, 1–9 for bzip2 (its block size in 100 kB), and none without a
    /// codec or for snappy and lz4 (Hadoop's codecs have none).
    pub fn new(codec: Compression, level: Option<i32>) -> Result<OutputCompression> {
        let range = match codec {
            Compression::None => None,
            Compression::Gzip | Compression::Deflate => Some(0..=9),
            Compression::Zstd => Some(1..=22),
            Compression::Bzip2 => Some(1..=9),
            Compression::Snappy | Compression::Lz4 => None,
        };
        match (level, range) {
            (Some(l), None) if codec == Compression::None => Err(Error::invalid("compression level", format!("{l} given without a codec (--compress)"))),
            (Some(l), None) => Err(Error::invalid("compression level", format!("{l} given, but {} has no levels", codec.name()))),
            (Some(l), Some(range)) if !range.contains(&l) => Err(Error::invalid(
                "compression level",
                format!("{l} is out of range: expected {}–{} for {}", range.start(), range.end(), codec.name()),
            )),
            _ => Ok(OutputCompression { codec, level }),
        }
    }
}

/// A reader that counts the bytes read through it: a compressed file's progress is told in its
/// own (compressed) bytes, which the job's totals are made of.
pub struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A compressed file's bytes, counted, through the buffer its decoder reads from.
pub type CompressedFile = BufReader<Counted<File>>;

/// Opens compressed file `path` through the decoder of `compression` (not `None`): the decoder,
/// and the count of the file's bytes read so far.
fn open_decoder(path: &Path, compression: Compression) -> Result<(Decompressed<CompressedFile>, Arc<AtomicU64>)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let count = Arc::new(AtomicU64::new(0));
    let counted = BufReader::with_capacity(64 << 10, Counted { inner: file, count: Arc::clone(&count) });
    let decoder = Decompressed::new(compression, counted).map_err(|e| Error::io(path, decoding_error(compression, e)))?;
    Ok((decoder, count))
}

/// A decompressing reader of `F`'s compressed bytes, whose errors say that they come from
/// decompressing (the decoders' own, such as "unexpected end of file", do not).
pub struct Decompressed<F: BufRead> {
    decoder: Decoder<F>,
    compression: Compression,
}

/// The decoder of each codec.
enum Decoder<F: BufRead> {
    Gzip(MultiGzDecoder<F>),
    Zstd(zstd::stream::read::Decoder<'static, F>),
    Deflate(MultiZlib<F>),
    Bzip2(bzip2::bufread::MultiBzDecoder<F>),
    /// Snappy or LZ4 in Hadoop's framing.
    Blocks(HadoopBlockReader<F>),
    /// The Snappy framing format (snzip, python-snappy), told by its first bytes.
    SnappyFrames(snap::read::FrameDecoder<F>),
    /// The LZ4 frame format (the `lz4` tool), told by its first bytes.
    Lz4Frames(MultiLz4<F>),
}

impl<F: BufRead> Decompressed<F> {
    /// The decoder of `compression` (not `None`) over `file`.
    fn new(compression: Compression, mut file: F) -> std::io::Result<Self> {
        let decoder = match compression {
            // A `.snappy` or `.lz4` file may also be in the codec's own framing, as its
            // command-line tools write it: told by its magic bytes, which no Hadoop block starts
            // with (as a block length they would be 4 GB, or 69 MB, past any Hadoop buffer).
            Compression::Snappy if file.fill_buf()?.starts_with(hadoop_blocks::SNAPPY_FRAMED) => Decoder::SnappyFrames(snap::read::FrameDecoder::new(file)),
            Compression::Lz4 if file.fill_buf()?.starts_with(hadoop_blocks::LZ4_FRAME) => Decoder::Lz4Frames(MultiLz4(lz4_flex::frame::FrameDecoder::new(file))),
            Compression::Gzip => Decoder::Gzip(MultiGzDecoder::new(file)),
            Compression::Zstd => Decoder::Zstd(zstd::stream::read::Decoder::with_buffer(file)?),
            Compression::Deflate => Decoder::Deflate(MultiZlib::new(file)),
            Compression::Bzip2 => Decoder::Bzip2(bzip2::bufread::MultiBzDecoder::new(file)),
            Compression::Snappy => Decoder::Blocks(HadoopBlockReader::new(file, BlockCodec::Snappy)),
            Compression::Lz4 => Decoder::Blocks(HadoopBlockReader::new(file, BlockCodec::Lz4)),
            Compression::None => unreachable!("an uncompressed file is read as it is"),
        };
        Ok(Decompressed { decoder, compression })
    }
}

impl Decompressed<CompressedFile> {
    /// Compressed bytes read from the file but not yet decoded.
    fn unread(&mut self) -> usize {
        match &mut self.decoder {
            Decoder::Gzip(d) => d.get_ref().buffer().len(),
            Decoder::Zstd(d) => d.get_ref().buffer().len(),
            Decoder::Deflate(d) => d.decoder().get_ref().buffer().len(),
            Decoder::Bzip2(d) => d.get_ref().buffer().len(),
            Decoder::Blocks(d) => d.get_ref().buffer().len(),
            Decoder::SnappyFrames(d) => d.get_ref().buffer().len(),
            Decoder::Lz4Frames(d) => d.0.get_ref().buffer().len(),
        }
    }
}

/// Concatenated zlib streams, read one after another: a zlib decoder stops at the end of its
/// stream, and the bytes after it (another part's stream, appended) would go unread.
struct MultiZlib<R: BufRead> {
    decoder: Option<ZlibDecoder<R>>,
}

impl<R: BufRead> MultiZlib<R> {
    fn new(compressed: R) -> Self {
        MultiZlib { decoder: Some(ZlibDecoder::new(compressed)) }
    }

    fn decoder(&mut self) -> &mut ZlibDecoder<R> {
        self.decoder.as_mut().expect("a decoder between reads")
    }
}

impl<R: BufRead> Read for MultiZlib<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.decoder().read(buf)?;
            if n > 0 || buf.is_empty() || self.decoder().get_mut().fill_buf()?.is_empty() {
                return Ok(n);
            }
            // A stream ended and bytes follow: the next stream.
            let rest = self.decoder.take().expect("a decoder between reads").into_inner();
            self.decoder = Some(ZlibDecoder::new(rest));
        }
    }
}

/// Concatenated LZ4 frames, read one after another: the frame decoder's read gives 0 at the end of
/// each frame, which would end the text there.
struct MultiLz4<R: BufRead>(lz4_flex::frame::FrameDecoder<R>);

impl<R: BufRead> Read for MultiLz4<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.0.read(buf)?;
            if n > 0 || buf.is_empty() || self.0.get_mut().fill_buf()?.is_empty() {
                return Ok(n);
            }
        }
    }
}

impl<F: BufRead> Read for Decompressed<F> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = match &mut self.decoder {
            Decoder::Gzip(d) => d.read(buf),
            Decoder::Zstd(d) => d.read(buf),
            Decoder::Deflate(d) => d.read(buf),
            Decoder::Bzip2(d) => d.read(buf),
            Decoder::Blocks(d) => d.read(buf),
            Decoder::SnappyFrames(d) => d.read(buf),
            Decoder::Lz4Frames(d) => d.read(buf),
        };
        read.map_err(|e| decoding_error(self.compression, e))
    }
}

/// A decoder's error, saying what was being decoded.
pub(crate) fn decoding_error(compression: Compression, e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::Interrupted {
        return e;
    }
    let codec = compression.name();
    if e.kind() == std::io::ErrorKind::Unsupported {
        // Another format under the codec's name: the message says what to do.
        return std::io::Error::new(e.kind(), format!("not valid {codec} data: {e}"));
    }
    std::io::Error::new(e.kind(), format!("not valid {codec} data: {e}; the input may be truncated or corrupt"))
}

/// Standard input, read with `codec` where one is given (`--stdin-compression`: Hadoop's Snappy
/// and LZ4 framing has no magic bytes to tell it by), else decompressed when it begins with the
/// magic bytes of gzip, zstd, bzip2, or the LZ4 frame and Snappy framing formats: a pipe has no
/// name to tell its codec by, and no text begins with those bytes.
pub fn stdin(codec: Option<Compression>) -> std::io::Result<Box<dyn Read>> {
    let mut stdin = std::io::stdin().lock();
    let mut magic = Vec::with_capacity(10);
    (&mut stdin).take(10).read_to_end(&mut magic)?;
    let compression = codec.unwrap_or_else(|| codec_of_magic(&magic));
    let whole = std::io::Cursor::new(magic).chain(stdin);
    Ok(match compression {
        Compression::None => Box::new(whole),
        codec => Box::new(Decompressed::new(codec, BufReader::with_capacity(64 << 10, whole)).map_err(|e| decoding_error(codec, e))?),
    })
}

/// The codec whose magic bytes `start` (a stream's first 10 bytes, or all of a shorter one)
/// begins with. bzip2's "BZh" and a block size digit could begin a text, so its block or
/// end-of-stream magic must follow as well.
fn codec_of_magic(start: &[u8]) -> Compression {
    const BZIP2_BLOCK: [u8; 6] = [0x31, 0x41, 0x59, 0x26, 0x53, 0x59];
    const BZIP2_END: [u8; 6] = [0x17, 0x72, 0x45, 0x38, 0x50, 0x90];
    match start {
        [0x1f, 0x8b, ..] => Compression::Gzip,
        [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
        [b'B', b'Z', b'h', b'1'..=b'9', rest @ ..] if rest.starts_with(&BZIP2_BLOCK) || rest.starts_with(&BZIP2_END) => Compression::Bzip2,
        // The codecs' own framings (Hadoop's has no magic: a pipe of it is not told).
        _ if start.starts_with(hadoop_blocks::LZ4_FRAME) => Compression::Lz4,
        _ if start.starts_with(hadoop_blocks::SNAPPY_FRAMED) => Compression::Snappy,
        _ => Compression::None,
    }
}

/// The reader of a compressed file's records.
pub type CompressedSplitReader = SplitReader<Decompressed<CompressedFile>>;

impl CompressedSplitReader {
    /// A reader of the records of the compressed file `path`, decompressed, from its start up to
    /// uncompressed offset `end` (`u64::MAX`: to its end), reading into `buffer`; and the count
    /// of the file's bytes read so far. A corrupt or truncated file is an error of the read that
    /// meets it.
    ///
    /// Decoding on a thread of its own, a block ahead of the scan, was tried: one file read by
    /// one of two workers went from 0.43 to 0.41 s (gzip) and 0.16 to 0.14 s (zstd), but two
    /// files read by two workers from 0.22 to 0.23 s and 0.089 to 0.095 s, and a large input is
    /// many files.
    pub fn open_compressed(path: &Path, compression: Compression, end: u64, max_record: usize, buffer: Vec<u8>) -> Result<(Self, Arc<AtomicU64>)> {
        let (source, count) = open_decoder(path, compression)?;
        let reader = SplitReader::with_buffer(source, 0, end, max_record, path.display().to_string(), buffer, READ_SIZE);
        Ok((reader, count))
    }
}

/// The start of file `path`'s text (decompressed), which its line ends and header are told
/// from; no longer than `limit` bytes past the sample.
pub fn text_start(path: &Path, compression: Compression, limit: usize) -> Result<TextStart> {
    let start = match compression {
        Compression::None => TextStart::read(File::open(path).map_err(|e| Error::io(path, e))?, limit),
        codec => TextStart::read(open_decoder(path, codec)?.0, limit),
    };
    start.map_err(|e| Error::io(path, e))
}

/// The first `sample` decompressed bytes of compressed file `path` (and the rest of what the
/// compressed bytes read for them hold), against those compressed bytes (the whole file, when
/// it is smaller than the sample). The compressed bytes are those read less those still in the
/// decoder's buffer.
///
/// A bzip2 decoder takes a whole block (up to 900 kB of text, a third of that compressed)
/// before it returns any of the block's text: stopped at the sample's end, it has read all of
/// the block it is in and returned only part of it. So the decoder is read on, in small pieces,
/// until it reads more of the file: the text of every block it read is then counted. Without
/// that, a 1 MiB sample of a file of 900 kB blocks, which bzip2 made 2.55 times smaller, gave
/// 1.5, and a filter sized for 1.47M keys that got 2M (a false-positive rate of 2.6% for a
/// target of 1%). Other codecs return text as they read, and read on at once.
pub fn expansion(path: &Path, compression: Compression, sample: u64) -> Result<Expansion> {
    if compression == Compression::None {
        return Ok(Expansion::default());
    }
    let (mut decoder, count) = open_decoder(path, compression)?;
    let consumed = |decoder: &mut Decompressed<CompressedFile>| count.load(Ordering::Relaxed).saturating_sub(decoder.unread() as u64);
    let mut produced = read_up_to(&mut decoder, sample, &mut vec![0u8; 64 << 10]).map_err(|e| Error::io(path, e))?;
    let read = consumed(&mut decoder);
    let mut piece = [0u8; 4096];
    loop {
        let n = read_up_to(&mut decoder, piece.len() as u64, &mut piece).map_err(|e| Error::io(path, e))?;
        // The piece that made the decoder read on holds at most this much text of what was
        // read before it: not counted.
        if n == 0 || consumed(&mut decoder) != read {
            break;
        }
        produced += n;
    }
    Ok(Expansion { text: produced, compressed: read })
}

/// Text bytes sampled of compressed files against the compressed bytes read for them: pooled
/// over several files of a codec ([`pooled_with`](Expansion::pooled_with)), their ratio is the codec's
/// expansion over the files sampled, each weighing as much as it read.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Expansion {
    /// Decompressed bytes sampled.
    pub text: u64,
    /// Compressed bytes read for them.
    pub compressed: u64,
}

impl Expansion {
    /// How many times larger the text is than its compressed bytes: at least 1 (a file that
    /// grew when compressed counts as its size), and 1 for nothing sampled.
    pub fn ratio(&self) -> f64 {
        match self.compressed {
            0 => 1.0,
            c => (self.text as f64 / c as f64).max(1.0),
        }
    }

    /// This sample pooled with `other`.
    pub fn pooled_with(self, other: Expansion) -> Expansion {
        Expansion { text: self.text + other.text, compressed: self.compressed + other.compressed }
    }
}

/// Reads and drops up to `limit` bytes of `r`, through `scratch`: how many there were.
fn read_up_to(r: &mut impl Read, limit: u64, scratch: &mut [u8]) -> std::io::Result<u64> {
    let mut total = 0u64;
    while total < limit {
        let want = scratch.len().min((limit - total) as usize);
        match r.read(&mut scratch[..want]) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_comes_from_the_suffix() {
        let of = |name: &str| Compression::of(Path::new(name));
        assert_eq!(of("a.csv.gz").unwrap(), Compression::Gzip);
        assert_eq!(of("dir/A.CSV.GZ").unwrap(), Compression::Gzip);
        assert_eq!(of("a.zst").unwrap(), Compression::Zstd);
        assert_eq!(of("a.tsv.zstd").unwrap(), Compression::Zstd);
        assert_eq!(of("part-r-00000.deflate").unwrap(), Compression::Deflate);
        assert_eq!(of("part-r-00000.bz2").unwrap(), Compression::Bzip2);
        assert_eq!(of("000000_0.snappy").unwrap(), Compression::Snappy);
        assert_eq!(of("part-m-00003.LZ4").unwrap(), Compression::Lz4);
        // A written file's suffix reads back as its codec.
        for c in [Compression::None].into_iter().chain(Compression::CODECS) {
            assert_eq!(of(&format!("part-00000{}", c.suffix())).unwrap(), c);
        }
        for plain in ["a.csv", "part-00000", "a.gzip.csv", ".gz"] {
            assert_eq!(of(plain).unwrap(), Compression::None, "{plain}");
        }
        for (name, codec) in [("a.csv.lzo", "LZO"), ("a.xz", "xz"), ("x.csv.br", "Brotli")] {
            let e = of(name).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains(codec) && e.contains("cannot read"), "{e}");
        }
    }

    /// Standard input's codec is told by its first bytes; a text that begins like bzip2's header
    /// ("BZh" and a digit) without its block or end-of-stream magic after is text.
    #[test]
    fn the_codec_of_standard_input_comes_from_its_magic_bytes() {
        let bzip2_of = |text: &[u8]| {
            let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
            std::io::Write::write_all(&mut encoder, text).unwrap();
            encoder.finish().unwrap()
        };
        assert_eq!(codec_of_magic(&bzip2_of(b"id\n1\n")[..10]), Compression::Bzip2);
        assert_eq!(codec_of_magic(&bzip2_of(b"")), Compression::Bzip2, "an empty stream");
        assert_eq!(codec_of_magic(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(codec_of_magic(&zstd::encode_all(&b"x"[..], 3).unwrap()[..4]), Compression::Zstd);
        assert_eq!(codec_of_magic(&lz4_flex::frame::FrameEncoder::new(Vec::new()).finish().unwrap()), Compression::Lz4);
        assert_eq!(codec_of_magic(b"\xff\x06\x00\x00sNaPpY"), Compression::Snappy);
        assert_eq!(codec_of_magic(b"\xff\x06\x00\x00sNaP"), Compression::None, "a part of snappy's magic");
        for text in [&b"BZh9,name\n1,a\n"[..], b"BZh", b"id,key\n", b"", b"\x1f"] {
            assert_eq!(codec_of_magic(text), Compression::None, "{text:?}");
        }
    }

    #[test]
    fn levels_are_checked_against_the_codec() {
        let ok = |c, l| OutputCompression::new(c, Some(l)).is_ok();
        assert!(ok(Compression::Gzip, 0) && ok(Compression::Gzip, 9) && ok(Compression::Deflate, 1) && ok(Compression::Zstd, 22));
        assert!(!ok(Compression::Gzip, 10) && !ok(Compression::Gzip, -1) && !ok(Compression::Zstd, 0) && !ok(Compression::Zstd, 23));
        assert!(ok(Compression::Bzip2, 1) && ok(Compression::Bzip2, 9) && !ok(Compression::Bzip2, 0) && !ok(Compression::Bzip2, 10));
        let e = OutputCompression::new(Compression::None, Some(3)).unwrap_err().to_string();
        assert!(e.contains("without a codec"), "{e}");
        for codec in [Compression::Snappy, Compression::Lz4] {
            assert!(OutputCompression::new(codec, None).is_ok());
            let e = OutputCompression::new(codec, Some(1)).unwrap_err().to_string();
            assert!(e.contains("has no levels") && e.contains(codec.name()), "{e}");
        }
        assert_eq!(OutputCompression::new(Compression::Zstd, None).unwrap().level, None);
    }

    /// The sampled expansion is the text's length over the compressed length, within the part
    /// of the compressed stream a decoder reads ahead of what it returns.
    #[test]
    fn the_expansion_of_a_small_file_is_its_compression_ratio() {
        let dir = tempfile::tempdir().unwrap();
        let text: Vec<u8> = (0..50_000).flat_map(|i: u32| format!("{i},{},row\n", i % 97).into_bytes()).collect();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &text).unwrap();
        let packed = gz.finish().unwrap();
        let path = dir.path().join("t.csv.gz");
        std::fs::write(&path, &packed).unwrap();
        let exact = text.len() as f64 / packed.len() as f64;
        let sampled = expansion(&path, Compression::Gzip, u64::MAX).unwrap().ratio();
        assert!((sampled - exact).abs() / exact < 0.01, "sampled {sampled}, exact {exact}");
        let zst = zstd::encode_all(&text[..], 3).unwrap();
        let path = dir.path().join("t.csv.zst");
        std::fs::write(&path, &zst).unwrap();
        let exact = text.len() as f64 / zst.len() as f64;
        let sampled = expansion(&path, Compression::Zstd, u64::MAX).unwrap().ratio();
        assert!((sampled - exact).abs() / exact < 0.01, "sampled {sampled}, exact {exact}");
    }

    /// Pooled samples weigh as the bytes they read: a 10× file of 1 kB and a 2× one of 9 kB
    /// pool to 28 kB of text for 10 kB compressed, not the files' mean ratio of 6.
    #[test]
    fn pooled_expansions_weigh_as_the_bytes_they_read() {
        let small = Expansion { text: 10_000, compressed: 1_000 };
        let large = Expansion { text: 18_000, compressed: 9_000 };
        assert_eq!(small.pooled_with(large), Expansion { text: 28_000, compressed: 10_000 });
        assert_eq!(small.pooled_with(large).ratio(), 2.8);
        assert_eq!(Expansion::default().ratio(), 1.0, "nothing sampled");
        assert_eq!(Expansion { text: 90, compressed: 100 }.ratio(), 1.0, "a file that grew counts as its size");
    }

    /// A sample of a bzip2 file that ends inside a block counts the whole block's text: of a
    /// file of 100 kB blocks, which compress alike, a sample of 130 kB (a block and a third)
    /// gives the file's ratio, where the sampled text over the compressed bytes read for it
    /// gave two thirds of it. So do samples that end at every few kB of the first blocks.
    #[test]
    fn a_sample_of_bzip2_counts_the_text_of_each_block_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut rng = crate::xorshift::XorShift::new(5);
        let text: Vec<u8> = (0..40_000).flat_map(|i: u32| format!("{i:06},{:05x},{:03}\n", rng.next() % 1_000_000, rng.next() % 1000).into_bytes()).collect();
        let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(1));
        std::io::Write::write_all(&mut bz, &text).unwrap();
        let packed = bz.finish().unwrap();
        let path = dir.path().join("t.csv.bz2");
        std::fs::write(&path, &packed).unwrap();
        let exact = text.len() as f64 / packed.len() as f64;
        assert!(text.len() > 600_000 && exact > 1.5, "{} bytes of text, {exact}", text.len());
        for sample in (20_000..300_000).step_by(7_000).chain([130_000, u64::MAX]) {
            let sampled = expansion(&path, Compression::Bzip2, sample).unwrap().ratio();
            assert!((sampled - exact).abs() / exact < 0.05, "sample {sample}: sampled {sampled}, exact {exact}");
        }
    }
}
