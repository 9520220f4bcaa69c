// Every file the lab writes goes through here: dumps, screenshots, texture dumps, `copy -o`,
// presets, reports, exports, the autosaves and the GUI's layout.
//
// The rules, so that no file the lab did not make is ever destroyed and no half-written output
// looks complete:
// - only regular files are written: a folder, device, FIFO or socket at the path is refused
//   (CantCreate, 73) before anything is opened, so a write can neither block nor hit a device;
// - an output that is the same file as an input (device and inode, through links) is refused
//   (CantCreate, 73);
// - the bytes go to a temporary file in the same folder, which is flushed, synced, checked and
//   then renamed over the path; on any failure the temporary goes and whatever was at the path
//   is untouched (Io, 74; CantCreate, 73 when the temporary cannot be made). A path that is a
//   link is written through: the link's target is replaced, the link stays;
// - a set of files (a dump) is put in place only when every file of it was written.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace lab {

// Records a file the lab reads (an input image or folder, a preset, a kernel file), so that no
// output may replace it. A folder records the files directly inside it. Paths that do not
// exist (or are not files) are ignored.
void note_input(const std::string& path);
void clear_inputs();  // tests

// Throws CantCreate if `path` names something the lab will not write (see above). Cheap: a
// command checks its outputs with it before it does any work.
void check_output_path(const std::string& path);

// One output file, written to a temporary and put in place by commit().
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);  // checks the path, creates the temporary
  ~OutputFile();                                 // without commit(): the temporary goes
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(const void* data, size_t bytes);  // Io on failure
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();  // flush, sync, close, rename; Io on failure (the temporary goes)
  const std::string& path() const { return m_path; }

 private:
  friend class OutputSet;
  OutputFile(const std::string& path, const std::string& temp_dir);
  void close_checked();
  void discard();
  std::string m_path;    // as given (messages)
  std::string m_target;  // the path written: a link's target
  std::string m_temp;
  int m_fd = -1;
};

// The whole file at once.
void write_output_file(const std::string& path, const std::string& bytes);

// Standard output, checked like a file: flushes std::cout and stdout and throws Io when a
// write failed (a full disk, a closed descriptor, a broken pipe with SIGPIPE ignored).
void check_stdout();

// A set of files in one folder (a dump): each written to a temporary; commit() puts them all in
// place, or none. The folder is created (with its parents) only by commit(), when every file
// was written. If the folder did not exist, the files are written into a temporary folder
// beside it that commit() renames, so even a killed process leaves no partial set; in an
// existing folder the renames run back to back with SIGINT and SIGTERM held.
class OutputSet {
 public:
  explicit OutputSet(const std::string& folder);  // checks the folder path; creates nothing
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // The file `name` in the folder (a plain file name, no '/'); valid until commit().
  OutputFile& add(const std::string& name);
  void commit();

 private:
  void prepare();
  std::string m_folder;
  std::string m_temp_dir;  // where the temporaries go until commit()
  bool m_new_folder = false;
  std::vector<std::unique_ptr<OutputFile>> m_files;
};

}  // namespace lab
