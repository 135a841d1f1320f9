#pragma once
// Chakra execution trace files (the format Chakra's protolib and ET feeder use, which ASTRA-sim
// reads): a varint32 length, then that many bytes of a serialized GlobalMetadata; then, node by
// node, a varint32 length and a serialized Node. The schema is io/chakra/et_def.proto (vendored
// from mlcommons/chakra).

#include <ostream>
#include <string>
#include <vector>

#include "io/chakra/et_def.pb.h"

namespace evsim {

// Appends `message` to `out` with its varint32 length prefix.
void writeChakraMessage(std::ostream& out, const google::protobuf::MessageLite& message);

// One trace file read back: its metadata and its nodes in file order.
struct ChakraTrace {
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<ChakraProtoMsg::Node> nodes;
};

// Reads a whole trace file. Throws InputError naming the file when it cannot be opened, ends
// inside a message, or holds a message that does not parse.
ChakraTrace readChakraTrace(const std::string& path);

}  // namespace evsim
