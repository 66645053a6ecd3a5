// Writes Hadoop CountingBloomFilters (m = 1000, k = 7, Jenkins and Murmur) of key-0..key-99
// added once, key-0 added 19 more times (its counters saturate at 15) and key-1 twice more, then
// key-50..key-59 deleted; and, for key-0..key-199, Hadoop's membershipTest and approximateCount.
//
//   javac -cp 'jars/*' HadoopCounting.java && java -cp 'jars/*:.' HadoopCounting OUT
import java.io.*;
import java.nio.charset.StandardCharsets;
import org.apache.hadoop.util.bloom.CountingBloomFilter;
import org.apache.hadoop.util.bloom.Key;
import org.apache.hadoop.util.hash.Hash;

public class HadoopCounting {
    public static void main(String[] args) throws Exception {
        for (String name : new String[] {"jenkins", "murmur"}) {
            int type = name.equals("jenkins") ? Hash.JENKINS_HASH : Hash.MURMUR_HASH;
            CountingBloomFilter f = new CountingBloomFilter(1000, 7, type);
            for (int i = 0; i < 100; i++) f.add(key(i));
            for (int i = 0; i < 19; i++) f.add(key(0));
            for (int i = 0; i < 2; i++) f.add(key(1));
            for (int i = 50; i < 60; i++) f.delete(key(i));
            try (DataOutputStream out = new DataOutputStream(new FileOutputStream(args[0] + "/hadoop_counting_" + name + ".bin"))) { f.write(out); }
            try (PrintWriter tsv = new PrintWriter(args[0] + "/hadoop_counting_" + name + ".tsv", "UTF-8")) {
                tsv.println("key\tmembership_test\tapproximate_count");
                for (int i = 0; i < 200; i++) tsv.println("key-" + i + "\t" + f.membershipTest(key(i)) + "\t" + f.approximateCount(key(i)));
            }
        }
    }

    static Key key(int i) { return new Key(("key-" + i).getBytes(StandardCharsets.UTF_8)); }
}
