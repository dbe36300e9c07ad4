package deltamark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums included), except that it sets permissions through
 * java.nio. Without Hadoop's native library, Hadoop starts a chmod process for every file and
 * directory it creates: about 7 ms each, some 50 ms per Spark write.
 */
public class NioLocalFileSystem extends LocalFileSystem {
  public NioLocalFileSystem() {
    super(new Raw());
  }

  /** The raw local file system with java.nio permissions. */
  public static class Raw extends RawLocalFileSystem {
    @Override
    public void setPermission(Path path, FsPermission permission) throws IOException {
      if (permission.getStickyBit()) {  // not expressible in java.nio
        super.setPermission(path, permission);
        return;
      }
      try {
        Files.setPosixFilePermissions(
            pathToFile(path).toPath(), PosixFilePermissions.fromString(permission.toString()));
      } catch (UnsupportedOperationException notPosix) {
        super.setPermission(path, permission);
      }
    }
  }
}
