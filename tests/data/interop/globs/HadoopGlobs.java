// Writes hadoop_globs.tsv: for each pattern of patterns.txt, the paths Hadoop's FileInputFormat
// takes for it (FileSystem.globStatus with its hidden-file filter) in a tree of the files that
// tree.txt lists, relative to the tree's root, sorted, space-separated.
//
//   javac -cp 'jars/*' HadoopGlobs.java && java -cp 'jars/*:.' HadoopGlobs > hadoop_globs.tsv
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;

public class HadoopGlobs {
    public static void main(String[] args) throws Exception {
        java.nio.file.Path root = Files.createTempDirectory("globs");
        for (String file : Files.readAllLines(Paths.get("tree.txt"))) {
            java.nio.file.Path path = root.resolve(file);
            Files.createDirectories(path.getParent());
            Files.writeString(path, "x\n");
        }
        FileSystem fs = FileSystem.getLocal(new Configuration()).getRaw();
        // FileInputFormat's hiddenFileFilter.
        PathFilter hidden = p -> !p.getName().startsWith("_") && !p.getName().startsWith(".");
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        out.println("pattern\tmatches");
        for (String pattern : Files.readAllLines(Paths.get("patterns.txt"))) {
            String matches;
            try {
                FileStatus[] found = fs.globStatus(new Path(root + "/" + pattern), hidden);
                String[] names = new String[found == null ? 0 : found.length];
                for (int i = 0; i < names.length; i++) names[i] = root.relativize(Paths.get(found[i].getPath().toUri().getPath())).toString();
                Arrays.sort(names);
                matches = String.join(" ", names);
            } catch (java.io.IOException e) {
                matches = "ERROR";
            }
            out.println(pattern + "\t" + matches);
        }
    }
}
