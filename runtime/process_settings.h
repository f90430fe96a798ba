// Process-wide settings a runtime may ask for (Runtime::Options::non_dumpable,
// child_subreaper): made when the first runtime holding one opens, put back
// as they were when the last holder closes, so that an embedding program's
// process is left as the runtime found it.
#pragma once

#include <string>

namespace carapace {

enum class ProcessSetting { kNonDumpable, kChildSubreaper };

class ProcessSettingHold {
 public:
  // Makes `setting` (if no other hold has); *error says why it could not be.
  ProcessSettingHold(ProcessSetting setting, std::string* error);
  ~ProcessSettingHold();
  ProcessSettingHold(const ProcessSettingHold&) = delete;
  ProcessSettingHold& operator=(const ProcessSettingHold&) = delete;

  // Whether the process has the setting now.
  static bool in_effect(ProcessSetting setting);

 private:
  ProcessSetting setting_;
  bool held_ = false;
};

}  // namespace carapace
