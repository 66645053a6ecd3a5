// Writes keys.csv compressed by each of Hadoop's codecs, as a Hadoop job writes its output
// (CompressionCodec.createOutputStream), with small codec buffers so that the block codecs
// (Snappy, LZ4) write many blocks; and decompresses each file given after "read" with the codec
// its suffix names, printing the text's line count and CRC32.
import java.io.*;
import java.nio.file.*;
import java.util.zip.CRC32;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.compress.*;
import org.apache.hadoop.util.ReflectionUtils;

public class HadoopCodecs {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        if (args[0].equals("write")) {
            conf.setInt("io.compression.codec.snappy.buffersize", 4096);
            conf.setInt("io.compression.codec.lz4.buffersize", 4096);
        }
        conf.set("io.compression.codec.bzip2.library", "java-builtin");
        CompressionCodecFactory factory = new CompressionCodecFactory(conf);
        if (args[0].equals("write")) {
            byte[] text = Files.readAllBytes(Paths.get(args[1]));
            String[] classes = {"org.apache.hadoop.io.compress.GzipCodec", "org.apache.hadoop.io.compress.DefaultCodec",
                "org.apache.hadoop.io.compress.BZip2Codec", "org.apache.hadoop.io.compress.SnappyCodec", "org.apache.hadoop.io.compress.Lz4Codec"};
            for (String name : classes) {
                CompressionCodec codec = (CompressionCodec) ReflectionUtils.newInstance(Class.forName(name), conf);
                String out = args[2] + codec.getDefaultExtension();
                try (OutputStream os = codec.createOutputStream(new FileOutputStream(out))) { os.write(text); }
                System.out.println(out);
            }
        } else {
            for (int i = 1; i < args.length; i++) {
                CompressionCodec codec = factory.getCodec(new Path(args[i]));
                try (InputStream in = codec.createInputStream(new FileInputStream(args[i]))) {
                    byte[] text = in.readAllBytes();
                    CRC32 crc = new CRC32(); crc.update(text);
                    long lines = 0; for (byte b : text) if (b == '\n') lines++;
                    System.out.println(args[i] + "\t" + codec.getClass().getSimpleName() + "\t" + text.length + " bytes\t" + lines + " lines\tcrc " + Long.toHexString(crc.getValue()));
                }
            }
        }
    }
}
