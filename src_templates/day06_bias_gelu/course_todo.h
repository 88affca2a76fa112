// Unfinished parts of the starter code announce themselves.
//
// Each piece left for you to write sits next to a line
//     COURSE_TODO("day02: what to write");
// at file scope. While any such line is compiled in, the op refuses to run and
// raises an error listing them, on the host: a half-written kernel never runs
// and never hands back garbage. Delete the line once the piece is written.
#pragma once

#include <string>
#include <vector>

// Hidden: each extension keeps its own list. Exported, the dynamic loader would merge the
// lists of every loaded library, and a rebuilt module would still report its old TODOs.
namespace course __attribute__((visibility("hidden"))) {

inline std::vector<std::string>& pending_todos() {
  static std::vector<std::string> todos;
  return todos;
}

struct TodoMarker {
  explicit TodoMarker(const char* what) { pending_todos().emplace_back(what); }
};

// Empty when every piece is written; otherwise one "TODO(dayNN): ..." line each.
inline std::string pending_todo_message() {
  std::string message;
  for (const std::string& todo : pending_todos()) {
    const auto colon = todo.find(':');
    message += "TODO(" + todo.substr(0, colon) + ")" + todo.substr(colon) + "\n";
  }
  return message;
}

}  // namespace course

#define COURSE_TODO_JOIN2(a, b) a##b
#define COURSE_TODO_JOIN(a, b) COURSE_TODO_JOIN2(a, b)
#define COURSE_TODO(what) \
  static const ::course::TodoMarker COURSE_TODO_JOIN(course_todo_, __LINE__)(what)
