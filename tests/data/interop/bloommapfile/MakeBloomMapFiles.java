// Writes BloomMapFile directories with Hadoop's own classes, and the answers of Hadoop's
// BloomMapFile.Reader.probablyHasKey for keys in and out of each, as reference vectors for
// bloomflow's reading of BloomMapFile filters (tests/data/interop/bloommapfile/).
//
//   javac -cp 'jars/*' MakeBloomMapFiles.java && java -cp 'jars/*:.' MakeBloomMapFiles OUT
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.io.BloomMapFile;
import org.apache.hadoop.io.BytesWritable;
import org.apache.hadoop.io.IntWritable;
import org.apache.hadoop.io.LongWritable;
import org.apache.hadoop.io.MapFile;
import org.apache.hadoop.io.SequenceFile;
import org.apache.hadoop.io.Text;
import org.apache.hadoop.io.WritableComparable;

public class MakeBloomMapFiles {
    interface Make { WritableComparable<?> of(String text); }

    public static void main(String[] args) throws Exception {
        String out = args[0];
        List<String> texts = new ArrayList<>();
        for (int i = 0; i < 150; i++) texts.add("id-" + i);
        texts.add("k".repeat(130));
        texts.add("caf\u00e9-\u00fcber");
        Collections.sort(texts, (a, b) -> new Text(a).compareTo(new Text(b)));
        List<String> longs = new ArrayList<>();
        for (long i = -40; i < 60; i++) longs.add(Long.toString(i * 1_000_000_007L));
        List<String> ints = new ArrayList<>();
        for (int i = -40; i < 60; i++) ints.add(Integer.toString(i * 1_000_003));
        List<String> otherTexts = new ArrayList<>();
        for (int i = 150; i < 1150; i++) otherTexts.add("id-" + i);
        List<String> otherNumbers = new ArrayList<>();
        for (int i = 0; i < 1000; i++) otherNumbers.add(Integer.toString(i * 7 + 3));

        write(out, "text.map", "murmur", texts, otherTexts, Text::new, Text.class);
        write(out, "long.map", "jenkins", longs, otherNumbers, s -> new LongWritable(Long.parseLong(s)), LongWritable.class);
        write(out, "int.map", "murmur", ints, otherNumbers, s -> new IntWritable(Integer.parseInt(s)), IntWritable.class);
        List<String> bytes = new ArrayList<>(texts);
        Collections.sort(bytes, (a, b) -> bytesOf(a).compareTo(bytesOf(b)));
        write(out, "bytes.map", "jenkins", bytes, otherTexts, MakeBloomMapFiles::bytesOf, BytesWritable.class);
    }

    static BytesWritable bytesOf(String text) {
        return new BytesWritable(text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    static void write(String out, String name, String hash, List<String> keys, List<String> others, Make make, Class<? extends WritableComparable> keyClass) throws Exception {
        Configuration conf = new Configuration();
        conf.set("hadoop.util.hash.type", hash);
        // 64 keys a row, so that the filter has several rows; Hadoop's default error rate.
        conf.setInt("io.mapfile.bloom.size", 64);
        FileSystem fs = FileSystem.getLocal(conf).getRaw();
        Path dir = new Path(out, name);
        BloomMapFile.Writer writer = new BloomMapFile.Writer(conf, dir,
            MapFile.Writer.keyClass(keyClass), MapFile.Writer.valueClass(Text.class),
            SequenceFile.Writer.compression(SequenceFile.CompressionType.NONE));
        for (String key : keys) writer.append(make.of(key), new Text("value of " + key));
        writer.close();
        BloomMapFile.Reader reader = new BloomMapFile.Reader(dir, conf);
        try (PrintWriter tsv = new PrintWriter(out + "/" + name.replace(".map", "_membership.tsv"), "UTF-8")) {
            tsv.println("key\tinserted\tprobably_has_key");
            for (String key : keys) tsv.println(key + "\ttrue\t" + reader.probablyHasKey(make.of(key)));
            for (String key : others) tsv.println(key + "\tfalse\t" + reader.probablyHasKey(make.of(key)));
        }
        reader.close();
    }
}
