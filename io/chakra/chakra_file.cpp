#include "io/chakra/chakra_file.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <fstream>

#include "common/error.h"

namespace evsim {

void writeChakraMessage(std::ostream& out, const google::protobuf::MessageLite& message) {
  const std::string bytes = message.SerializeAsString();
  // protolib's _EncodeVarint32: 7 bits at a time, low first, the high bit set on all but the last.
  uint32_t size = static_cast<uint32_t>(bytes.size());
  EVSIM_CHECK(bytes.size() == size, "Chakra message of {} bytes is too large", bytes.size());
  char prefix[5];
  int n = 0;
  do {
    uint8_t byte = size & 0x7f;
    size >>= 7;
    if (size != 0) byte |= 0x80;
    prefix[n++] = static_cast<char>(byte);
  } while (size != 0);
  out.write(prefix, n);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

ChakraTrace readChakraTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) EVSIM_THROW(InputError, "{}: cannot open the Chakra trace", path);
  google::protobuf::io::IstreamInputStream raw(&in);
  ChakraTrace trace;
  auto read_one = [&](google::protobuf::MessageLite& message, size_t index) {
    google::protobuf::io::CodedInputStream coded(&raw);
    uint32_t size = 0;
    if (!coded.ReadVarint32(&size)) return false;
    const auto limit = coded.PushLimit(static_cast<int>(size));
    if (!message.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
      EVSIM_THROW(InputError, "{}: message {} ({} bytes) is truncated or does not parse", path,
                  index, size);
    }
    coded.PopLimit(limit);
    return true;
  };
  if (!read_one(trace.metadata, 0)) {
    EVSIM_THROW(InputError, "{}: empty, no GlobalMetadata message", path);
  }
  for (size_t i = 1;; ++i) {
    ChakraProtoMsg::Node node;
    if (!read_one(node, i)) break;
    trace.nodes.push_back(std::move(node));
  }
  return trace;
}

}  // namespace evsim
