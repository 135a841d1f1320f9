// Implemented by the profiler work (see profile_db.h for the format).
#include "modeler/profile_db.h"
