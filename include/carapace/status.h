// <carapace/status.h>: Status, how every Carapace call reports an error (a
// code and a message naming what was wrong); nothing throws across the API.
#pragma once

#include "base/status.h"
