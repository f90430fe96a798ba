#include "runtime/process_settings.h"

#include <sys/prctl.h>

#include <cerrno>
#include <cstring>
#include <mutex>

namespace carapace {
namespace {

struct Slot {
  int holders = 0;
  int previous = 0;  // the value before the first holder
};

std::mutex mu;
Slot slots[2];

int current(ProcessSetting s) {
  if (s == ProcessSetting::kNonDumpable) return ::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  int on = 0;
  if (::prctl(PR_GET_CHILD_SUBREAPER, &on, 0, 0, 0) != 0) return -1;
  return on;
}

int set(ProcessSetting s, int value) {
  return s == ProcessSetting::kNonDumpable ? ::prctl(PR_SET_DUMPABLE, value, 0, 0, 0)
                                           : ::prctl(PR_SET_CHILD_SUBREAPER, value, 0, 0, 0);
}

// The value that holds the setting.
int wanted(ProcessSetting s) { return s == ProcessSetting::kNonDumpable ? 0 : 1; }

}  // namespace

ProcessSettingHold::ProcessSettingHold(ProcessSetting setting, std::string* error) : setting_(setting) {
  std::lock_guard lock(mu);
  Slot& slot = slots[static_cast<int>(setting)];
  if (slot.holders == 0) {
    slot.previous = current(setting);
    if (set(setting, wanted(setting)) != 0) {
      if (error != nullptr) {
        *error = std::string(setting == ProcessSetting::kNonDumpable ? "PR_SET_DUMPABLE" : "PR_SET_CHILD_SUBREAPER") +
                 " failed: " + std::strerror(errno);
      }
      return;
    }
  }
  ++slot.holders;
  held_ = true;
}

ProcessSettingHold::~ProcessSettingHold() {
  if (!held_) return;
  std::lock_guard lock(mu);
  Slot& slot = slots[static_cast<int>(setting_)];
  if (--slot.holders == 0 && slot.previous >= 0 && slot.previous != wanted(setting_)) {
    (void)set(setting_, slot.previous);
  }
}

bool ProcessSettingHold::in_effect(ProcessSetting setting) { return current(setting) == wanted(setting); }

}  // namespace carapace
