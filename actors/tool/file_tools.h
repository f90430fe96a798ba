// File tools: the built-in "read_file", "write_file" and "list_dir" tools,
// which read and change files inside the session's workspace.
//
// Every path a model gives goes through resolve_in_workspace
// (actors/tool/workspace.h); a path outside the workspace, or one that leaves it
// through a symbolic link, fails the call with a message saying so. Files are
// text: read_file refuses a file with NUL bytes. Offsets and limits count
// bytes, so that they compose with the size list_dir reports.
//
//   read_file  {"path", "offset"?, "limit"?}  idempotent. Returns the bytes of
//              [offset, offset+limit); at most max_read_bytes of them: beyond
//              that, truncated is set, original_bytes is the file's size, and a
//              last line says which offset to read on from.
//   write_file {"path", "content", "append"?} not idempotent (an append run
//              again after a crash writes twice). Replaces the file, or
//              appends to it; creates missing parent directories inside the
//              workspace. A replacement is written to a temporary file in the
//              same directory and renamed over the target, so a reader sees
//              the old content or the new, whole (not synced: a power loss
//              may lose it). A file with more than one hard link is refused:
//              its other names could be outside the workspace. A last name
//              that is a symbolic link inside the workspace writes its target.
//   list_dir   {"path"? = "."}               idempotent. One entry a line,
//              sorted by name: "name/" for a directory, "name (N bytes)" for a
//              file, "name -> target" for a symbolic link; at most
//              max_list_entries lines, then a line counting the rest. A name
//              or target that could be misread (a newline would fake an
//              entry) is shown in double quotes with C escapes.
//
// Thread safety: the tool functions hold only immutable options and may be
// called from several threads at once; they block on file I/O.
#pragma once

#include <cstdint>

#include "actors/tool/tool.h"

namespace carapace {

struct FileToolOptions {
  uint64_t max_read_bytes = 256 * 1024;
  uint64_t max_write_bytes = 4 * 1024 * 1024;
  uint64_t max_list_entries = 1000;
};

ToolDefinition make_read_file_tool(const FileToolOptions& options);
ToolDefinition make_write_file_tool(const FileToolOptions& options);
ToolDefinition make_list_dir_tool(const FileToolOptions& options);

}  // namespace carapace
