//! Compressed inputs: any bytes in a file named `.gz`, `.zst`, `.deflate`, `.bz2`, `.snappy` or `.lz4` read to their end or
//! to an error, never a panic; and any text, compressed, reads back as exactly its records.
#![no_main]
use bloomflow::compressed::{CompressedSplitReader, Compression};
use bloomflow::hadoop_blocks::{BlockCodec, HadoopBlockWriter};
use libfuzzer_sys::fuzz_target;
use std::io::Write;
use std::path::Path;

/// Every record of compressed file `path`, or the error that stopped the read.
fn records(path: &Path, compression: Compression) -> bloomflow::Result<Vec<Vec<u8>>> {
    let (mut reader, _) = CompressedSplitReader::open_compressed(path, compression, u64::MAX, 1 << 20, Vec::new())?;
    let mut out = Vec::new();
    while let Some((_, record)) = reader.next_record()? {
        out.push(record.to_vec());
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, text)) = data.split_first() else { return };
    let (compression, suffix) = match which % 6 {
        0 => (Compression::Gzip, "gz"),
        1 => (Compression::Zstd, "zst"),
        2 => (Compression::Bzip2, "bz2"),
        3 => (Compression::Snappy, "snappy"),
        4 => (Compression::Lz4, "lz4"),
        _ => (Compression::Deflate, "deflate"),
    };
    let path = std::path::PathBuf::from(format!("/dev/shm/bloomflow-fuzz-compressed-{}.{suffix}", std::process::id()));
    std::fs::write(&path, text).unwrap();
    let _ = records(&path, compression);
    let packed = match compression {
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(text).unwrap();
            encoder.finish().unwrap()
        }
        Compression::Deflate => {
            let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(text).unwrap();
            encoder.finish().unwrap()
        }
        Compression::Bzip2 => {
            let mut encoder = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
            encoder.write_all(text).unwrap();
            encoder.finish().unwrap()
        }
        Compression::Snappy | Compression::Lz4 => {
            let codec = if compression == Compression::Snappy { BlockCodec::Snappy } else { BlockCodec::Lz4 };
            let mut writer = HadoopBlockWriter::new(Vec::new(), codec);
            writer.write_all(text).unwrap();
            writer.finish().unwrap()
        }
        _ => zstd::encode_all(text, 1).unwrap(),
    };
    std::fs::write(&path, &packed).unwrap();
    let read = records(&path, compression).expect("a whole compressed file reads");
    assert_eq!(read.concat(), text, "bytes lost or changed");
});
