// Text the S3 files share: trimming and lower-casing (ini files, response headers) and the
// few XML elements S3 answers with. uri_encode and the s3:// URL are in s3_client.hpp.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace shardpack::remote {

std::string trim(const std::string& s);
std::string lower(std::string s);
// The text of the first <tag>...</tag> at or after `from`, entities decoded; `next` is set past it.
bool xml_element(const std::string& xml, const std::string& tag, std::size_t from, std::string& value,
                 std::size_t* next = nullptr);
std::string strip_quotes(std::string s);
// "Code: Message" of an S3 error body, or "".
std::string s3_error_text(const std::vector<unsigned char>& body);

}  // namespace shardpack::remote
