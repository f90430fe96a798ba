// <carapace/provider.h>: Provider, to run sessions on a model backend of your
// own (Runtime::Options::provider).
#pragma once

#include "actors/provider/provider.h"
