// The input side: the CSV parser, the class tables and the input list (header detection,
// columns, path resolution, task inference, class ids), and image folders as input (masks
// paired by a suffix, end to end through the CLI). Every error test checks that the message
// names the file and the line.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>

#include "errors.hpp"
#include "input/class_table.hpp"
#include "input/csv_reader.hpp"
#include "input/input_list.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<std::vector<std::string>> cells_of(const std::vector<csv_row>& rows) {
    std::vector<std::vector<std::string>> out;
    for (const auto& r : rows) out.push_back(r.cells);
    return out;
}

std::vector<std::size_t> lines_of(const std::vector<csv_row>& rows) {
    std::vector<std::size_t> out;
    for (const auto& r : rows) out.push_back(r.line);
    return out;
}

using cells = std::vector<std::vector<std::string>>;
using lines = std::vector<std::size_t>;

const char* const class_dict_text = "name,r,g,b\nsky,128,128,128\nroad,128,64,128\ncar,64,0,128\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// CSV parser

TEST_CASE("csv: plain rows, with or without a trailing newline", "[input][csv]") {
    CHECK(cells_of(parse_csv("a,b\nc,d\n", "t.csv")) == cells{{"a", "b"}, {"c", "d"}});
    CHECK(cells_of(parse_csv("a,b\nc,d", "t.csv")) == cells{{"a", "b"}, {"c", "d"}});
    CHECK(lines_of(parse_csv("a,b\nc,d", "t.csv")) == lines{1, 2});
    CHECK(parse_csv("", "t.csv").empty());
    CHECK(parse_csv("\n\n", "t.csv").empty());
}

TEST_CASE("csv: empty fields and a trailing comma", "[input][csv]") {
    CHECK(cells_of(parse_csv("a,,c\n,\nx,\n\"\",y\n", "t.csv")) ==
          cells{{"a", "", "c"}, {"", ""}, {"x", ""}, {"", "y"}});
    CHECK(cells_of(parse_csv("a,", "t.csv")) == cells{{"a", ""}});
}

TEST_CASE("csv: quoted commas, doubled quotes and spaces are kept", "[input][csv]") {
    const auto rows = parse_csv("\"a,b\",\"say \"\"hi\"\"\",\" padded \"\n\"\"\"\",plain text\n", "t.csv");
    CHECK(cells_of(rows) == cells{{"a,b", "say \"hi\"", " padded "}, {"\"", "plain text"}});
}

TEST_CASE("csv: newlines inside quotes are kept and counted", "[input][csv]") {
    const auto rows = parse_csv("\"one\ntwo\",x\n\"three\r\nfour\",y\r\n\"five\rsix\",z\nlast,w\n", "t.csv");
    CHECK(cells_of(rows) == cells{{"one\ntwo", "x"}, {"three\r\nfour", "y"}, {"five\rsix", "z"}, {"last", "w"}});
    CHECK(lines_of(rows) == lines{1, 3, 5, 7});
}

TEST_CASE("csv: CRLF and lone CR line ends", "[input][csv]") {
    CHECK(cells_of(parse_csv("a,b\r\nc,d\r\n", "t.csv")) == cells{{"a", "b"}, {"c", "d"}});
    const auto cr = parse_csv("a,b\rc,d\r\re,f", "t.csv");
    CHECK(cells_of(cr) == cells{{"a", "b"}, {"c", "d"}, {"e", "f"}});
    CHECK(lines_of(cr) == lines{1, 2, 4});
}

TEST_CASE("csv: a UTF-8 BOM is dropped", "[input][csv]") {
    const auto rows = parse_csv("\xEF\xBB\xBFimage,label\r\na.png,1\r\n", "t.csv");
    CHECK(cells_of(rows) == cells{{"image", "label"}, {"a.png", "1"}});
    CHECK(lines_of(rows) == lines{1, 2});
    CHECK(cells_of(parse_csv("\xEF\xBB\xBF\"q\",x", "t.csv")) == cells{{"q", "x"}});
}

TEST_CASE("csv: blank and whitespace-only lines are skipped but counted", "[input][csv]") {
    const auto rows = parse_csv("\n\na,b\n\n  \t\nc,d\r\n\r\ne,f\n\n", "t.csv");
    CHECK(cells_of(rows) == cells{{"a", "b"}, {"c", "d"}, {"e", "f"}});
    CHECK(lines_of(rows) == lines{3, 6, 8});
}

TEST_CASE("csv: an unterminated quoted field names the line it opens on", "[input][csv]") {
    REQUIRE_THROWS_AS(parse_csv("a,b\nc,\"d\n\ne,f\n", "list.csv"), input_error);
    REQUIRE_THROWS_WITH(parse_csv("a,b\nc,\"d\n\ne,f\n", "list.csv"),
                        Contains("list.csv:2: unterminated quoted field starting here"));
    REQUIRE_THROWS_WITH(parse_csv("\"abc", "list.csv"), Contains("list.csv:1: unterminated quoted field"));
}

TEST_CASE("csv: a quote inside an unquoted field is an error", "[input][csv]") {
    REQUIRE_THROWS_AS(parse_csv("a,b\nsay \"hi\",c\n", "list.csv"), input_error);
    REQUIRE_THROWS_WITH(parse_csv("a,b\nsay \"hi\",c\n", "list.csv"), Contains("list.csv:2: unexpected character '\"'"));
    // A space before the opening quote makes the field unquoted.
    REQUIRE_THROWS_WITH(parse_csv("a, \"b\"\n", "list.csv"), Contains("list.csv:1: unexpected character"));
}

TEST_CASE("csv: text after a closing quote is an error", "[input][csv]") {
    REQUIRE_THROWS_AS(parse_csv("x,y\n\"a\"b,c\n", "list.csv"), input_error);
    REQUIRE_THROWS_WITH(parse_csv("x,y\n\"a\"b,c\n", "list.csv"),
                        Contains("list.csv:2: unexpected character after closing quote"));
    REQUIRE_THROWS_WITH(parse_csv("\"a\" ,c\n", "list.csv"), Contains("list.csv:1: unexpected character after closing quote"));
}

TEST_CASE("csv: an error after a multi-line quoted record names its own line", "[input][csv]") {
    const std::string text = "image,label\n\"multi\nline\r\nvalue\",1\n\nok.png,2\nbad\"x,3\n";
    REQUIRE_THROWS_WITH(parse_csv(text, "list.csv"), Contains("list.csv:7: unexpected character"));
    // An error inside the multi-line field itself names the physical line of the character.
    REQUIRE_THROWS_WITH(parse_csv("a,b\n\"one\ntwo\"x,b\n", "list.csv"),
                        Contains("list.csv:3: unexpected character after closing quote"));
}

TEST_CASE("csv: NUL bytes and UTF-16 are refused", "[input][csv]") {
    const std::string nul_plain("a,b\nc\0d,e\n", 10);
    REQUIRE_THROWS_WITH(parse_csv(nul_plain, "list.csv"), Contains("list.csv:2: NUL byte"));
    const std::string nul_quoted("a,b\n\n\"c\0\",e\n", 12);
    REQUIRE_THROWS_WITH(parse_csv(nul_quoted, "list.csv"), Contains("list.csv:3: NUL byte"));
    REQUIRE_THROWS_WITH(parse_csv(std::string("\xFF\xFEi\0m\0", 6), "list.csv"), Contains("list.csv:1: the file is UTF-16"));
}

TEST_CASE("csv: read_text_file reads bytes and names the path on failure", "[input][csv]") {
    temp_dir dir{"input"};
    const std::string bytes("x\0y\r\n", 5);
    CHECK(read_text_file(dir.write("f.csv", bytes)) == bytes);
    CHECK(read_text_file(dir.write("empty.csv", "")).empty());
    REQUIRE_THROWS_AS(read_text_file(dir / "missing.csv"), input_error);
    REQUIRE_THROWS_WITH(read_text_file(dir / "missing.csv"),
                        Contains("cannot read " + (dir / "missing.csv") + ": cannot open: No such file or directory"));
    REQUIRE_THROWS_WITH(read_text_file(dir.str()), Contains("cannot read " + dir.str() + ": not a regular file (a folder)"));
}

namespace {
// What a csv_stream gives when its reader hands out at most `piece` bytes a call, so that every
// record, quote, "" escape and CRLF also straddles a refill somewhere.
std::vector<csv_row> parse_in_pieces(std::string_view text, std::size_t piece) {
    std::size_t at = 0;
    csv_stream stream(
        [&](char* buf, std::size_t n) {
            const std::size_t k = std::min({n, piece, text.size() - at});
            std::copy_n(text.data() + at, k, buf);
            at += k;
            return k;
        },
        "t.csv");
    std::vector<csv_row> rows;
    csv_row row{};
    while (stream.next(row)) rows.push_back(row);
    return rows;
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const input_error& e) {
        return e.what();
    }
    return "no error";
}
}  // namespace

TEST_CASE("csv: a stream fed in small pieces parses exactly as the whole text", "[input][csv]") {
    const std::vector<std::string> texts = {
        "\xEF\xBB\xBFimage,label\r\na.png,1\r\n",
        "\"one\ntwo\",x\n\"three\r\nfour\",y\r\n\"five\rsix\",z\nlast,w",
        "\n\na,b\n\n  \t\nc,d\r\n\r\ne,f\n\n",
        "\"a,b\",\"say \"\"hi\"\"\",\" padded \"\n\"\"\"\",plain text\n,\nx,\r",
        "a,b\rc,d\r\re,f",
        "",
        "\xEF\xBB\xBF",
    };
    for (const auto& text : texts) {
        const auto whole = parse_csv(text, "t.csv");
        for (std::size_t piece : {1, 2, 3, 7}) {
            INFO("text " << text << " in pieces of " << piece);
            const auto pieces = parse_in_pieces(text, piece);
            CHECK(cells_of(pieces) == cells_of(whole));
            CHECK(lines_of(pieces) == lines_of(whole));
        }
    }
    const std::vector<std::string> bad = {"a,b\nc,\"d\n\ne,f\n", "a,b\nsay \"hi\",c\n", "x,y\n\"a\"b,c\n",
                                          std::string("a,b\nc\0d,e\n", 10), std::string("\xFF\xFEi\0m\0", 6),
                                          "a,b\n\"one\ntwo\"x,b\n"};
    for (const auto& text : bad) {
        const std::string expected = error_of([&] { parse_csv(text, "t.csv"); });
        REQUIRE(expected.rfind("t.csv:", 0) == 0);
        for (std::size_t piece : {1, 2, 5}) CHECK(error_of([&] { parse_in_pieces(text, piece); }) == expected);
    }
}

// ---------------------------------------------------------------------------------------------
// Class tables

TEST_CASE("class dict: CamVid layout, ids in file order", "[input][classes]") {
    temp_dir dir{"input"};
    const auto classes = load_class_dict(dir.write("class_dict.csv", class_dict_text));
    REQUIRE(classes.size() == 3);
    CHECK(classes[0].name == "sky");
    CHECK(classes[1].name == "road");
    CHECK(classes[2].name == "car");
    CHECK(classes[1].has_color);
    CHECK((int(classes[1].r) == 128 && int(classes[1].g) == 64 && int(classes[1].b) == 128));
}

TEST_CASE("class dict: extra columns, any order, any case, name aliases", "[input][classes]") {
    temp_dir dir{"input"};
    const auto classes = load_class_dict(dir.write(
        "d.csv", "\xEF\xBB\xBF" "class_id,B,description,G,Class_Name,R\r\n7,3,\"blue, mostly\",2, water ,1\r\n8,0,x,0,void,0\r\n"));
    REQUIRE(classes.size() == 2);
    CHECK(classes[0].name == "water");
    CHECK((int(classes[0].r) == 1 && int(classes[0].g) == 2 && int(classes[0].b) == 3));
    CHECK(classes[1].name == "void");
    const auto spaced = load_class_dict(dir.write("s.csv", "class, red, green, blue\nsky, 10, 20, 30\n"));
    CHECK((spaced[0].name == "sky" && int(spaced[0].r) == 10 && int(spaced[0].b) == 30));
}

TEST_CASE("class dict: missing columns name the file and the header line", "[input][classes]") {
    temp_dir dir{"input"};
    const std::string path = dir.write("class_dict.csv", "\nname,r,g\nsky,1,2\n");
    REQUIRE_THROWS_AS(load_class_dict(path), input_error);
    REQUIRE_THROWS_WITH(load_class_dict(path), Contains(path + ":2:") && Contains("no column(s) b"));
    const std::string headerless = dir.write("h.csv", "sky,128,128,128\n");
    REQUIRE_THROWS_WITH(load_class_dict(headerless), Contains(headerless + ":1:") && Contains("name r g b"));
}

TEST_CASE("class dict: bad color values", "[input][classes]") {
    temp_dir dir{"input"};
    const std::string big = dir.write("big.csv", "name,r,g,b\nsky,1,2,3\nroad,1,256,3\n");
    REQUIRE_THROWS_WITH(load_class_dict(big), Contains(big + ":3:") && Contains("'256'") && Contains("0..255"));
    const std::string neg = dir.write("neg.csv", "name,r,g,b\nsky,-1,2,3\n");
    REQUIRE_THROWS_WITH(load_class_dict(neg), Contains(neg + ":2:") && Contains("'-1'"));
    const std::string word = dir.write("word.csv", "name,r,g,b\nsky,1,2,blue\n");
    REQUIRE_THROWS_WITH(load_class_dict(word), Contains(word + ":2:") && Contains("'blue' in column 'b'"));
    const std::string frac = dir.write("frac.csv", "name,r,g,b\nsky,1.5,2,3\n");
    REQUIRE_THROWS_WITH(load_class_dict(frac), Contains(frac + ":2:"));
    const std::string short_row = dir.write("short.csv", "name,r,g,b\nsky,1,2,3\nroad,1,2\n");
    REQUIRE_THROWS_WITH(load_class_dict(short_row), Contains(short_row + ":3: expected at least 4 columns, found 3"));
}

TEST_CASE("class dict: duplicates name both lines", "[input][classes]") {
    temp_dir dir{"input"};
    const std::string color = dir.write("c.csv", "name,r,g,b\nsky,1,2,3\n\nroad,4,5,6\ncar,1,2,3\n");
    REQUIRE_THROWS_AS(load_class_dict(color), input_error);
    REQUIRE_THROWS_WITH(load_class_dict(color), Contains(color + ":5:") && Contains("'car'") &&
                                                     Contains("class 'sky' on line 2"));
    const std::string name = dir.write("n.csv", "name,r,g,b\nsky,1,2,3\nroad,4,5,6\nsky,7,8,9\n");
    REQUIRE_THROWS_WITH(load_class_dict(name), Contains(name + ":4: duplicate class name 'sky' (first on line 2)"));
}

TEST_CASE("class dict: empty names, no classes, too many classes", "[input][classes]") {
    temp_dir dir{"input"};
    const std::string empty_name = dir.write("e.csv", "name,r,g,b\nsky,1,2,3\n  ,4,5,6\n");
    REQUIRE_THROWS_WITH(load_class_dict(empty_name), Contains(empty_name + ":3: empty class name"));
    const std::string none = dir.write("none.csv", "name,r,g,b\n\n");
    REQUIRE_THROWS_WITH(load_class_dict(none), Contains(none + ":1:") && Contains("no classes"));
    const std::string blank = dir.write("blank.csv", "");
    REQUIRE_THROWS_WITH(load_class_dict(blank), Contains(blank) && Contains("empty"));

    std::string many = "name,r,g,b\n";
    for (int i = 0; i <= 65535; ++i)
        many += "c" + std::to_string(i) + "," + std::to_string(i >> 16) + "," + std::to_string((i >> 8) & 255) + "," +
                std::to_string(i & 255) + "\n";
    const std::string too_many = dir.write("many.csv", many);
    REQUIRE_THROWS_WITH(load_class_dict(too_many), Contains(too_many + ":65537: too many classes"));
    const std::string limit = dir.write("limit.csv", many.substr(0, many.rfind("c65535,")));
    CHECK(load_class_dict(limit).size() == 65535);
}

TEST_CASE("class names: one per line, or a CSV with an optional header", "[input][classes]") {
    temp_dir dir{"input"};
    const auto plain = load_class_names(dir.write("a.txt", "cat\r\n\r\ndog\n bird \n"));
    REQUIRE(plain.size() == 3);
    CHECK((plain[0].name == "cat" && plain[1].name == "dog" && plain[2].name == "bird"));
    CHECK_FALSE(plain[0].has_color);
    const auto header = load_class_names(dir.write("b.csv", "Name,description\ncat,\"small, furry\"\ndog,loyal\n"));
    REQUIRE(header.size() == 2);
    CHECK(header[0].name == "cat");
    // A class_dict.csv works as a names list; its name column need not come first.
    const auto dict = load_class_names(dir.write("c.csv", "class_id,name,r,g,b\n0,sky,1,2,3\n1,road,4,5,6\n"));
    REQUIRE(dict.size() == 2);
    CHECK(dict[1].name == "road");
}

TEST_CASE("class names: errors", "[input][classes]") {
    temp_dir dir{"input"};
    const std::string dup = dir.write("dup.txt", "cat\ndog\n\ncat\n");
    REQUIRE_THROWS_AS(load_class_names(dup), input_error);
    REQUIRE_THROWS_WITH(load_class_names(dup), Contains(dup + ":4: duplicate class name 'cat' (first on line 1)"));
    const std::string empty_cell = dir.write("e.csv", "name\ncat\n\"\"\n");
    REQUIRE_THROWS_WITH(load_class_names(empty_cell), Contains(empty_cell + ":3: empty class name"));
    const std::string none = dir.write("none.txt", "\n\n");
    REQUIRE_THROWS_WITH(load_class_names(none), Contains(none) && Contains("empty"));
    const std::string short_row = dir.write("s.csv", "id,name\n0,cat\n1\n");
    REQUIRE_THROWS_WITH(load_class_names(short_row), Contains(short_row + ":3: expected at least 2 columns, found 1"));
}

// ---------------------------------------------------------------------------------------------
// Input list: header detection and columns

namespace {
input_options options_for(const std::string& csv) {
    input_options o;
    o.csv_path = csv;
    return o;
}
}  // namespace

TEST_CASE("input: a header is detected when the second row's file exists", "[input][header]") {
    temp_dir dir{"input"};
    dir.touch("images/a.png");
    dir.touch("images/b.png");
    const auto csv = dir.write("list.csv", "file,category\nimages/a.png,1\nimages/b.png,0\n");
    const auto list = load_input_list(options_for(csv));
    CHECK(list.had_header);
    REQUIRE(list.size() == 2);
    CHECK(list.row(0).csv_line == 2);
    CHECK(list.row(0).key == "images/a.png");
}

TEST_CASE("input: no header when the first row's file exists", "[input][header]") {
    temp_dir dir{"input"};
    dir.touch("image");  // a file really called "image" is data, not a header word
    dir.touch("b.png");
    const auto csv = dir.write("list.csv", "image,1\nb.png,0\n");
    const auto list = load_input_list(options_for(csv));
    CHECK_FALSE(list.had_header);
    CHECK(list.size() == 2);
    CHECK(list.row(0).csv_line == 1);
}

TEST_CASE("input: with no files on disk, header words decide", "[input][header]") {
    temp_dir dir{"input"};
    const auto words = load_input_list(options_for(dir.write("a.csv", "Image Path,label,split\nx/a.png,cat\n")));
    CHECK(words.had_header);
    CHECK(words.size() == 1);
    const auto only_header = load_input_list(options_for(dir.write("b.csv", "image,mask\n")));
    CHECK(only_header.had_header);
    CHECK(only_header.empty());
    const auto data = load_input_list(options_for(dir.write("c.csv", "x/a.png,cat\nx/b.png,dog\n")));
    CHECK_FALSE(data.had_header);
    CHECK(data.size() == 2);
    // Column words but a path-like cell: data.
    const auto pathy = load_input_list(options_for(dir.write("d.csv", "image,label,img/x.png\na.png,cat,q\n")));
    CHECK_FALSE(pathy.had_header);
}

TEST_CASE("input: --header and --no-header override detection", "[input][header]") {
    temp_dir dir{"input"};
    dir.touch("a.png");
    dir.touch("b.png");
    auto o = options_for(dir.write("list.csv", "a.png,1\nb.png,2\n"));
    o.header = header_mode::present;
    auto list = load_input_list(o);
    CHECK(list.had_header);
    REQUIRE(list.size() == 1);
    CHECK(list.row(0).key == "b.png");

    o = options_for(dir.write("words.csv", "image,label\nb.png,dog\n"));
    o.header = header_mode::absent;
    list = load_input_list(o);
    CHECK_FALSE(list.had_header);
    REQUIRE(list.size() == 2);
    CHECK(list.row(0).key == "image");
    CHECK(list.row(0).label_key == "label");
}

TEST_CASE("input: columns by name, exact then case-insensitive", "[input][columns]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "id,Label,notes,Image\n1,cat,x,a.png\n2,dog,y,b.png\n");
    auto o = options_for(csv);
    o.image_col = "image";
    o.label_col = "Label";
    const auto list = load_input_list(o);
    CHECK(list.had_header);
    REQUIRE(list.size() == 2);
    CHECK(list.row(1).key == "b.png");
    CHECK(list.row(1).label_key == "dog");

    // An exact match wins over a case-insensitive one.
    const auto both = dir.write("both.csv", "path,PATH,label\nwrong.png,right.png,cat\n");
    o = options_for(both);
    o.image_col = "PATH";
    o.label_col = "2";
    CHECK(load_input_list(o).row(0).key == "right.png");
    o.image_col = "Path";
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(both + ":1") && Contains("several columns"));
}

TEST_CASE("input: an unknown column name lists the header", "[input][columns]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "\nimage,label\na.png,1\n");
    auto o = options_for(csv);
    o.label_col = "mask";
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("column 'mask' not found in header of " + csv + ":2; columns are: image, label"));
    o.header = header_mode::absent;
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("--no-header") && Contains("'mask'"));
    const auto empty = dir.write("empty.csv", "");
    o = options_for(empty);
    o.image_col = "image";
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(empty) && Contains("empty"));
}

TEST_CASE("input: columns by index", "[input][columns]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "3,x,a.png\n4,y,b.png\n");
    auto o = options_for(csv);
    o.image_col = "2";
    o.label_col = "0";
    const auto list = load_input_list(o);
    REQUIRE(list.size() == 2);
    CHECK(list.row(0).key == "a.png");
    CHECK(list.row(0).class_id == 3);

    const auto short_csv = dir.write("short.csv", "a.png,1,x\n\nb.png,2\n");
    o = options_for(short_csv);
    o.label_col = "2";
    REQUIRE_THROWS_AS(load_input_list(o), input_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(short_csv + ":3: expected at least 3 columns, found 2"));

    o.label_col = "-1";
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    o.label_col = "0";
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("same column"));
}

TEST_CASE("input: empty image or label cells name the line", "[input][columns]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "image,label\na.png,1\n\n\"\",2\n");
    REQUIRE_THROWS_AS(load_input_list(options_for(csv)), input_error);
    REQUIRE_THROWS_WITH(load_input_list(options_for(csv)), Contains(csv + ":4: empty image path"));
    const auto label = dir.write("label.csv", "image,label\na.png,1\nb.png, \n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(label)), Contains(label + ":3: empty label"));
}

TEST_CASE("input: an error after a multi-line quoted record names the right line", "[input][columns]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "image,label,note\na.png,1,\"two\nlines\"\nb.png\n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(csv)), Contains(csv + ":4: expected at least 2 columns, found 1"));
    const auto unterminated = dir.write("u.csv", "image,label\na.png,1\n\"b.png,2\nc.png,3\n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(unterminated)),
                        Contains(unterminated + ":3: unterminated quoted field starting here"));
}

// ---------------------------------------------------------------------------------------------
// Input list: paths

TEST_CASE("input: relative paths resolve against the CSV's folder, absolute ones are kept", "[input][paths]") {
    temp_dir dir{"input"};
    const std::string abs_image = dir.touch("elsewhere/abs.png");
    dir.touch("lists/images/a.png");  // so that detection sees a data row, not a header
    const auto csv = dir.write("lists/list.csv", "images/a.png,0\n" + abs_image + ",1\n");
    const auto list = load_input_list(options_for(csv));
    REQUIRE(list.size() == 2);
    CHECK(list.row(0).key == "images/a.png");
    CHECK(list.image_path(0) == (fs::path(dir / "lists") / "images/a.png").string());
    CHECK(list.image_path(1) == abs_image);
}

TEST_CASE("input: --root replaces the CSV's folder", "[input][paths]") {
    temp_dir dir{"input"};
    const std::string text = "images/a.png,0\n";
    const auto csv = dir.write("lists/list.csv", text);
    fs::create_directories(dir / "data");
    auto o = options_for(csv);
    o.root = dir / "data";
    const auto list = load_input_list(o);
    CHECK(list.image_path(0) == (fs::path(dir / "data") / "images/a.png").string());
    CHECK(list.csv_digest == XXH3_64bits(text.data(), text.size()));

    o.root = dir / "no-such-folder";
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("--root " + (dir / "no-such-folder")));
}

TEST_CASE("input: a CSV in the working folder keeps relative paths as written", "[input][paths]") {
    temp_dir dir{"input"};
    dir.write("list.csv", "a.png,0\n");
    const auto old = fs::current_path();
    fs::current_path(dir.str());
    input_list list;
    try {
        list = load_input_list(options_for("list.csv"));
    } catch (...) {
        fs::current_path(old);
        throw;
    }
    fs::current_path(old);
    CHECK(list.image_path(0) == "a.png");
}

TEST_CASE("input: quoted paths with spaces, commas and quotes", "[input][paths]") {
    temp_dir dir{"input"};
    dir.touch("my images/a, b.png");
    dir.touch("my images/say \"hi\".png");
    const auto csv = dir.write("list.csv", "image,label\n\"my images/a, b.png\",cat\n\"my images/say \"\"hi\"\".png\",dog\n");
    const auto list = load_input_list(options_for(csv));
    CHECK(list.had_header);
    REQUIRE(list.size() == 2);
    CHECK(list.row(0).key == "my images/a, b.png");
    CHECK(fs::exists(list.image_path(0)));
    CHECK(list.row(1).key == "my images/say \"hi\".png");
    CHECK(fs::exists(list.image_path(1)));
}

TEST_CASE("input: row accessors give each row's cells, line, class and resolved paths", "[input][paths]") {
    temp_dir dir{"input"};
    const std::string abs_image = dir.touch("elsewhere/abs.png");
    const std::string abs_mask = dir.touch("elsewhere/abs_mask.png");
    dir.touch("lists/img/a.png");
    dir.touch("lists/lbl/a.png");
    const auto classes = dir.write("class_dict.csv", class_dict_text);
    // Blank lines, a two-line quoted label and a quoted key with "" move the line numbers
    // away from the row numbers.
    const auto csv = dir.write("lists/list.csv", "image,mask\n\nimg/a.png,lbl/a.png\n" + abs_image + "," + abs_mask +
                                                     "\n\"img/say \"\"hi\"\".png\",\"lbl/two\nlines.png\"\n\n"
                                                     "img/last.png,/m/last.png");
    auto o = options_for(csv);
    o.classes_path = classes;
    const auto list = load_input_list(o);
    CHECK(list.task == task_kind::segmentation);
    REQUIRE(list.size() == 4);
    const std::string folder = dir / "lists";
    CHECK(list.base_dir == folder);
    const std::vector<std::tuple<std::size_t, std::string, std::string, std::string, std::string>> expected = {
        {3, "img/a.png", "lbl/a.png", folder + "/img/a.png", folder + "/lbl/a.png"},
        {4, abs_image, abs_mask, abs_image, abs_mask},
        {5, "img/say \"hi\".png", "lbl/two\nlines.png", folder + "/img/say \"hi\".png", folder + "/lbl/two\nlines.png"},
        {8, "img/last.png", "/m/last.png", folder + "/img/last.png", "/m/last.png"},
    };
    std::string reused = "stale text that must go";
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const auto& [line, key, label_key, image, mask] = expected[i];
        INFO("row " << i);
        const sample_row r = list.row(i);
        CHECK(r.csv_line == line);
        CHECK(std::string(r.key) == key);
        CHECK(std::string(r.label_key) == label_key);
        CHECK(r.class_id == -1);
        CHECK(list.image_path(i) == image);
        CHECK(list.label_path(i) == mask);
        list.image_path(i, reused);
        CHECK(reused == image);
        list.label_path(i, reused);
        CHECK(reused == mask);
    }

    // --root: relative cells join it (a trailing '/' is not doubled); absolute ones stay.
    fs::create_directories(dir / "data");
    o.root = dir / "data/";
    o.header = header_mode::present;
    const auto rooted = load_input_list(o);
    REQUIRE(rooted.size() == 4);
    CHECK(rooted.image_path(0) == dir / "data/img/a.png");
    CHECK(rooted.label_path(0) == dir / "data/lbl/a.png");
    CHECK(rooted.image_path(1) == abs_image);
    CHECK(rooted.label_path(3) == "/m/last.png");

    // Classification: the class ids are per row and there is no label file.
    const auto cls = load_input_list(options_for(dir.write("lists/cls.csv", "a.png,2\n\nb.png,0\n/abs/c.png, 1\n")));
    REQUIRE(cls.size() == 3);
    CHECK(cls.row(0).class_id == 2);
    CHECK(cls.row(1).class_id == 0);
    CHECK(cls.row(1).csv_line == 3);
    CHECK(cls.row(2).class_id == 1);
    CHECK(std::string(cls.row(2).label_key) == " 1");
    CHECK(cls.image_path(2) == "/abs/c.png");
    CHECK(cls.label_path(0).empty());
}

TEST_CASE("input: a list longer than the read buffer keeps every row, line and the file's digest", "[input][paths]") {
    temp_dir dir{"input"};
    std::string text = "image,label\n";
    const std::size_t count = 12000;  // about 300 KiB: records cross several 64 KiB reads
    for (std::size_t i = 0; i < count; ++i) {
        text += "\"images/sample \"\"" + std::to_string(i) + "\"\".png\"," + std::to_string(i % 7);
        text += i % 5 == 0 ? "\r\n\r\n" : "\n";
    }
    const auto csv = dir.write("list.csv", text);
    const auto list = load_input_list(options_for(csv));
    CHECK(list.csv_digest == XXH3_64bits(text.data(), text.size()));
    CHECK(list.had_header);
    REQUIRE(list.size() == count);
    std::size_t line = 2;
    for (std::size_t i = 0; i < count; ++i) {
        const sample_row r = list.row(i);
        if (r.key != "images/sample \"" + std::to_string(i) + "\".png" || r.csv_line != line ||
            r.class_id != std::int32_t(i % 7)) {
            FAIL("row " << i << ": key " << std::string(r.key) << ", line " << r.csv_line << " (expected " << line
                        << "), class " << r.class_id);
        }
        line += i % 5 == 0 ? 2 : 1;
    }
    // A syntax error at the end still wins over a data error near the start, as when the
    // whole file was parsed before the rows were checked.
    const auto late = dir.write("late.csv", "a.png,1\nonly-one-cell\n" + text.substr(12) + "\"open");
    REQUIRE_THROWS_WITH(load_input_list(options_for(late)), Contains(late + ":") && Contains("unterminated quoted field"));
    const auto early = dir.write("early.csv", "a.png,1\nonly-one-cell\n" + text.substr(12));
    REQUIRE_THROWS_WITH(load_input_list(options_for(early)), Contains(early + ":2: expected at least 2 columns, found 1"));
}

// ---------------------------------------------------------------------------------------------
// Input list: tasks and classes

TEST_CASE("input: integer labels infer classification by id", "[input][task]") {
    temp_dir dir{"input"};
    const auto list = load_input_list(options_for(dir.write("list.csv", "a.png,3\nb.png, 0\nc.png,007\n")));
    CHECK(list.task == task_kind::classification);
    REQUIRE(list.classes.size() == 8);
    CHECK(list.classes[0].name == "0");
    CHECK(list.classes[7].name == "7");
    CHECK(list.row(0).class_id == 3);
    CHECK(list.row(1).class_id == 0);
    CHECK(list.row(1).label_key == " 0");
    CHECK(list.row(2).class_id == 7);
    CHECK(list.label_path(0).empty());
}

TEST_CASE("input: labels that are existing files infer segmentation", "[input][task]") {
    temp_dir dir{"input"};
    dir.touch("img/a.png");
    dir.touch("lbl/a_mask");
    const auto classes = dir.write("class_dict.csv", class_dict_text);
    auto o = options_for(dir.write("list.csv", "image,mask\nimg/a.png,lbl/a_mask\nimg/b.png,lbl/b_mask\n"));
    o.classes_path = classes;
    const auto list = load_input_list(o);
    CHECK(list.had_header);
    CHECK(list.task == task_kind::segmentation);
    REQUIRE(list.classes.size() == 3);
    CHECK(list.classes[2].name == "car");
    REQUIRE(list.size() == 2);
    CHECK(list.row(1).label_key == "lbl/b_mask");
    CHECK(list.label_path(1) == (fs::path(dir.str()) / "lbl/b_mask").string());
    CHECK(list.row(1).class_id == -1);

    // An image extension is enough even when the first mask is missing.
    o.csv_path = dir.write("ext.csv", "img/a.png,gone/a.PNG\n");
    CHECK(load_input_list(o).task == task_kind::segmentation);
}

TEST_CASE("input: name labels infer classification with sorted names", "[input][task]") {
    temp_dir dir{"input"};
    const auto list = load_input_list(
        options_for(dir.write("list.csv", "a.png,zebra\nb.png,Zebra\nc.png,\xC3\xA4pfel\nd.png,apple\ne.png, zebra\n")));
    CHECK(list.task == task_kind::classification);
    REQUIRE(list.classes.size() == 4);
    // Byte-wise: upper case before lower case before UTF-8 multibyte.
    CHECK(list.classes[0].name == "Zebra");
    CHECK(list.classes[1].name == "apple");
    CHECK(list.classes[2].name == "zebra");
    CHECK(list.classes[3].name == "\xC3\xA4pfel");
    CHECK(list.row(0).class_id == 2);
    CHECK(list.row(1).class_id == 0);
    CHECK(list.row(2).class_id == 3);
    CHECK(list.row(4).class_id == 2);
}

TEST_CASE("input: segmentation needs a class dictionary", "[input][task]") {
    temp_dir dir{"input"};
    dir.touch("m.png");
    const auto csv = dir.write("list.csv", "\na.png,m.png\n");
    REQUIRE_THROWS_AS(load_input_list(options_for(csv)), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(options_for(csv)), Contains(csv + ":2:") && Contains("--classes"));
    auto o = options_for(csv);
    o.task = task_kind::segmentation;
    REQUIRE_THROWS_AS(load_input_list(o), usage_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("--task seg needs --classes"));
    // A bad dictionary reports its own file and line.
    o.classes_path = dir.write("class_dict.csv", "name,r,g,b\nsky,1,2,3\nsky,4,5,6\n");
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(o.classes_path + ":3: duplicate class name"));
}

TEST_CASE("input: a forced task overrides inference", "[input][task]") {
    temp_dir dir{"input"};
    auto o = options_for(dir.write("list.csv", "a.png,1\nb.png,2\n"));
    o.task = task_kind::segmentation;
    o.classes_path = dir.write("class_dict.csv", class_dict_text);
    auto list = load_input_list(o);
    CHECK(list.task == task_kind::segmentation);
    CHECK(list.label_path(0) == (fs::path(dir.str()) / "1").string());

    dir.touch("m.png");
    o = options_for(dir.write("cls.csv", "a.png,m.png\n"));
    o.task = task_kind::classification;
    list = load_input_list(o);
    CHECK(list.task == task_kind::classification);
    REQUIRE(list.classes.size() == 1);
    CHECK(list.classes[0].name == "m.png");
    CHECK(list.label_path(0).empty());
}

TEST_CASE("input: a names file maps names and ids by position", "[input][task]") {
    temp_dir dir{"input"};
    auto o = options_for(dir.write("list.csv", "a.png,dog\nb.png,0\nc.png,bird\nd.png,2\n"));
    o.classes_path = dir.write("names.txt", "cat\ndog\nbird\n");
    const auto list = load_input_list(o);
    CHECK(list.task == task_kind::classification);
    REQUIRE(list.classes.size() == 3);
    CHECK(list.classes[0].name == "cat");
    CHECK(list.row(0).class_id == 1);
    CHECK(list.row(1).class_id == 0);
    CHECK(list.row(2).class_id == 2);
    CHECK(list.row(3).class_id == 2);

    // Integer labels with a names file: classes come from the file, ids must be below its size.
    o.csv_path = dir.write("ids.csv", "a.png,0\nb.png,1\n\nc.png,3\n");
    REQUIRE_THROWS_AS(load_input_list(o), input_error);
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(o.csv_path + ":4: class id '3' is out of range 0..2") &&
                                                Contains(o.classes_path));
    o.csv_path = dir.write("unknown.csv", "a.png,cat\nb.png,fish\n");
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(o.csv_path + ":2: label 'fish' is not a class in " + o.classes_path));
}

TEST_CASE("input: numeric class names that contradict ids are refused", "[input][task]") {
    temp_dir dir{"input"};
    auto o = options_for(dir.write("list.csv", "a.png,1\nb.png,2\n"));
    o.classes_path = dir.write("names.txt", "2\n1\n0\n");  // "1" is id 1 either way; "2" is not
    REQUIRE_THROWS_WITH(load_input_list(o), Contains(o.csv_path + ":2: label '2' is ambiguous"));
    o.classes_path = dir.write("same.txt", "0\n1\n2\n");
    CHECK(load_input_list(o).row(1).class_id == 2);
}

TEST_CASE("input: class id range without a names file", "[input][task]") {
    temp_dir dir{"input"};
    const auto big = dir.write("big.csv", "a.png,1\nb.png,65535\n");
    REQUIRE_THROWS_AS(load_input_list(options_for(big)), input_error);
    REQUIRE_THROWS_WITH(load_input_list(options_for(big)), Contains(big + ":2: class id '65535' is out of range 0..65534"));
    const auto neg = dir.write("neg.csv", "a.png,1\n\nb.png,-1\n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(neg)), Contains(neg + ":3: class id '-1' is out of range"));
    const auto huge = dir.write("huge.csv", "a.png,99999999999999999999999\n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(huge)), Contains(huge + ":1: class id"));
    const auto top = load_input_list(options_for(dir.write("top.csv", "a.png,65534\n")));
    CHECK(top.classes.size() == 65535);
    CHECK(top.classes.back().name == "65534");
}

TEST_CASE("input: mixed ids and names without a names file", "[input][task]") {
    temp_dir dir{"input"};
    const auto csv = dir.write("list.csv", "image,label\na.png,1\nb.png,2\n\nc.png,cat\n");
    REQUIRE_THROWS_AS(load_input_list(options_for(csv)), input_error);
    REQUIRE_THROWS_WITH(load_input_list(options_for(csv)),
                        Contains(csv + ":5: label 'cat' is a class name but line 2 has the class id '1'"));
    const auto names_first = dir.write("nf.csv", "a.png,cat\nb.png,3\n");
    REQUIRE_THROWS_WITH(load_input_list(options_for(names_first)),
                        Contains(names_first + ":2: label '3' is a class id but line 1 has the class name 'cat'"));
}

TEST_CASE("input: a missing list or names file names the path", "[input][task]") {
    temp_dir dir{"input"};
    REQUIRE_THROWS_AS(load_input_list(options_for(dir / "nope.csv")), input_error);
    REQUIRE_THROWS_WITH(load_input_list(options_for(dir / "nope.csv")), Contains("cannot read " + (dir / "nope.csv")));
    auto o = options_for(dir.write("list.csv", "a.png,cat\n"));
    o.classes_path = dir / "names.txt";
    REQUIRE_THROWS_WITH(load_input_list(o), Contains("cannot read " + (dir / "names.txt")));
    REQUIRE_THROWS_AS(load_input_list(input_options{}), usage_error);
}

// ---------------------------------------------------------------------------------------------
// Image folders as input (build and colors --images/--masks), end to end through the CLI

TEST_CASE("folder input pairs masks by a suffix and says what it left out and why", "[labels][folders]") {
    // About a second: 6 small samples, a few builds and colors runs.
    temp_dir dir("folders");
    make_samples(dir / "src", {"--count", "6", "--width", "40", "--height", "30"});
    const std::string dict = dir / "src/class_dict.csv";
    // CamVid's names: images/img_0000.png, labels/img_0000_L.png
    fs::create_directories(dir / "cam/images/sub");
    fs::create_directories(dir / "cam/labels/sub");
    for (int i = 0; i < 6; ++i) {
        char stem[32];
        std::snprintf(stem, sizeof stem, "img_%04d", i);
        const std::string sub = i >= 4 ? "sub/" : "";
        fs::copy_file(dir / ("src/images/" + std::string(stem) + ".png"), dir / ("cam/images/" + sub + stem + ".png"));
        fs::copy_file(dir / ("src/masks/" + std::string(stem) + ".png"), dir / ("cam/labels/" + sub + stem + "_L.png"));
    }
    // without the suffix: refused, and the masks' names suggest it
    auto r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--classes", dict, "--out", dir / "x"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("6 of 6 images in") && Catch::Contains("--mask-suffix _L") &&
                          Catch::Contains("img_0000.png and img_0000_L.png"));
    // with it: the same records as the CSV, keys relative to the images folder; nothing left out
    r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict,
             "--out", dir / "a"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains(": 6 images paired with masks; no file left out"));
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dict, "--out", dir / "b"});
    REQUIRE(r.code == 0);
    {
        auto a = dataset::open(dir / "a");
        auto b = dataset::open(dir / "b");
        REQUIRE(a.size() == 6);
        for (std::size_t i = 0; i < 6; ++i) {
            const auto sa = a.at(i), sb = b.at(i);
            const auto la = sa.label(), lb = sb.label();
            CHECK(std::equal(la.begin(), la.end(), lb.begin(), lb.end()));
        }
        CHECK(std::string(a.at(4).key()) == "sub/img_0004.png");
    }
    // what is left out, by reason, with each file under -v: a GIF, a text file, a FIFO named .png,
    // a mask without an image, a mask without the suffix
    write_file(dir / "cam/images/anim.gif", "GIF89a");
    write_file(dir / "cam/images/notes.txt", "x");
    REQUIRE(::mkfifo((dir / "cam/images/pipe.png").c_str(), 0600) == 0);
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "cam/labels/extra_L.png");
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "cam/labels/img_0001.png");
    r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict,
             "--out", dir / "c"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("6 images paired with masks; 5 files left out: 2 x not a .png, .jpg, .jpeg, .tif or .tiff file, "
                                      "1 x a FIFO, not a regular file, 1 x a mask whose name does not end with the --mask-suffix _L, "
                                      "1 x a mask without an image (-v lists each)") &&
                          Catch::Contains("5 file(s) of the folders left out"));
    CHECK_THAT(r.err, !Catch::Contains("left out " + dir / "cam/images/anim.gif"));
    r = cli({"build", "-v", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes",
             dict, "--out", dir / "c"});
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("left out " + dir / "cam/images/anim.gif: not a .png, .jpg, .jpeg, .tif or .tiff file") &&
                          Catch::Contains("left out " + dir / "cam/images/pipe.png: a FIFO, not a regular file") &&
                          Catch::Contains("left out " + dir / "cam/labels/extra_L.png: a mask without an image") &&
                          Catch::Contains("left out " + dir / "cam/labels/img_0001.png: a mask whose name does not end"));
    // colors takes the same options and says the same
    r = cli({"colors", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("6 images paired with masks; 5 files left out"));
    CHECK_THAT(r.out, Catch::Contains("example at pixel") && !Catch::Contains("(line"));
    // masks beside the images in one folder: the suffix tells them apart
    fs::create_directories(dir / "one");
    for (int i = 0; i < 3; ++i) {
        fs::copy_file(dir / ("src/images/img_000" + std::to_string(i) + ".png"), dir / ("one/img_000" + std::to_string(i) + ".png"));
        fs::copy_file(dir / ("src/masks/img_000" + std::to_string(i) + ".png"), dir / ("one/img_000" + std::to_string(i) + "_L.png"));
    }
    r = cli({"build", "--images", dir / "one", "--masks", dir / "one", "--mask-suffix", "_L", "--classes", dict, "--out", dir / "d"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(dataset::open(dir / "d").size() == 3);
    r = cli({"build", "--images", dir / "one", "--masks", dir / "one", "--classes", dict, "--out", dir / "d2"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("is the --images folder: give --mask-suffix"));
    // --image-suffix: Cityscapes' names (x_leftImg8bit.png with x_gtFine_color.png)
    fs::create_directories(dir / "city/left");
    fs::create_directories(dir / "city/fine");
    for (int i = 0; i < 2; ++i) {
        const std::string n = "aachen_00000" + std::to_string(i);
        fs::copy_file(dir / ("src/images/img_000" + std::to_string(i) + ".png"), dir / ("city/left/" + n + "_leftImg8bit.png"));
        fs::copy_file(dir / ("src/masks/img_000" + std::to_string(i) + ".png"), dir / ("city/fine/" + n + "_gtFine_color.png"));
    }
    r = cli({"build", "--images", dir / "city/left", "--masks", dir / "city/fine", "--image-suffix", "_leftImg8bit",
             "--mask-suffix", "_gtFine_color", "--classes", dict, "--out", dir / "e"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(dataset::open(dir / "e").size() == 2);
    // the suffix options need folders
    CHECK(cli({"build", "--csv", dir / "src/list.csv", "--mask-suffix", "_L", "--classes", dict, "--out", dir / "f"}).code == 2);
    CHECK(cli({"colors", "--csv", dir / "src/list.csv", "--mask-suffix", "_L"}).code == 2);
}

TEST_CASE("folder input refuses two masks for one image: names that differ only in case, or only in extension", "[labels][folders]") {
    temp_dir dir("foldercase");
    make_samples(dir / "src", {"--count", "2", "--width", "24", "--height", "16"});
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "src/masks/IMG_0000.png");
    auto r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
                  "--out", dir / "a"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("two masks for one image: " + dir / "src/masks/IMG_0000.png and " +
                                      dir / "src/masks/img_0000.png (names that differ only in case)"));
    r = cli({"colors", "--images", dir / "src/images", "--masks", dir / "src/masks"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("names that differ only in case"));
    fs::remove(dir / "src/masks/IMG_0000.png");
    fs::copy_file(dir / "src/masks/img_0001.png", dir / "src/masks/img_0001.jpg");
    r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
             "--out", dir / "a"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("img_0001.jpg and ") && Catch::Contains("(the same name, another extension)"));
}

namespace {
// A Unix socket bound at `path` (left there when the descriptor closes); false where the path is
// too long for sockaddr_un.
bool make_socket(const std::string& path) {
    sockaddr_un a{};
    if (path.size() >= sizeof a.sun_path) return false;
    a.sun_family = AF_UNIX;
    std::copy(path.begin(), path.end(), a.sun_path);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0;
    if (fd >= 0) ::close(fd);
    return bound;
}
}  // namespace

TEST_CASE("folder input errors name the FIFO, socket or device named like the image or mask they miss", "[labels][folders]") {
    temp_dir dir("folderspecial");
    make_samples(dir / "src", {"--count", "3", "--width", "24", "--height", "16"});
    const std::string dict = dir / "src/class_dict.csv";
    // A mask that is a FIFO: the image "has no mask", and the FIFO of its name is said.
    fs::remove(dir / "src/masks/img_0002.png");
    REQUIRE(::mkfifo((dir / "src/masks/img_0002.png").c_str(), 0600) == 0);
    auto r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dict, "--out", dir / "a"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains("have no mask of the same name") &&
                          Contains(dir / "src/masks/img_0002.png" + " (a FIFO, not a regular file)"));
    r = cli({"colors", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dict});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains(dir / "src/masks/img_0002.png" + " (a FIFO, not a regular file)"));
    // A class folder holding only special files named .png: "no .png files", and which are there.
    fs::create_directories(dir / "cls/cat");
    REQUIRE(::mkfifo((dir / "cls/cat/a.png").c_str(), 0600) == 0);
    const bool socket_made = make_socket(dir / "cls/cat/b.png");
    write_file(dir / "cls/cat/notes.txt", "x");
    r = cli({"build", "--images", dir / "cls", "--out", dir / "b"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Contains("no .png, .jpg, .jpeg, .tif or .tiff files") && Contains(dir / "cls/cat/a.png" + " (a FIFO, not a regular file)"));
    if (socket_made) CHECK_THAT(r.err, Contains(dir / "cls/cat/b.png" + " (a socket, not a regular file)"));
    CHECK(!fs::exists(dir / "b"));
    if (::geteuid() == 0) {
        REQUIRE(::mknod((dir / "cls/cat/c.png").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0);
        r = cli({"build", "--images", dir / "cls", "--out", dir / "b"});
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Contains(dir / "cls/cat/c.png" + " (a device, not a regular file)"));
    }
    if (!socket_made) SHARDPACK_SKIP("the socket case: the temporary path is too long for a Unix socket");
    if (::geteuid() != 0) SHARDPACK_SKIP("the device case: not root, cannot make a device node");
}
