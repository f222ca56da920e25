"""The text the tiny-model tokenizer is trained on, generated in code so every machine builds the
same tokenizer without a download.

The corpus covers what the mini tasks produce: English, math word problems with LaTeX answers,
Python tool code, text-game commands, search-agent tags and JSON tool calls. Changing anything
here changes every tiny model's tokenizer: bump `tiny.BUILD_VERSION` when you do.
"""

from __future__ import annotations

import random

COMMON_WORDS = """
the of and to a in is it you that he was for on are with as I his they be at one have this from or
had by hot word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too
same tell does set three want air well also play small end put home read hand port large spell add
even land here must big high such follow act why ask men change went light kind off need house
picture try us again animal point mother world near build self earth father head stand own page
should country found answer school grow study still learn plant cover food sun four between state
keep eye never last let thought city tree cross farm hard start might story saw far sea draw left
late run while press close night real life few north open seem together next white children begin
got walk example ease paper group always music those both mark often letter until mile river car
feet care second book carry took science eat room friend began idea fish mountain stop once base
hear horse cut sure watch color face wood main enough plain girl usual young ready above ever red
list though feel talk bird soon body dog family direct pose leave song measure door product black
short numeral class wind question happen complete ship area half rock order fire south problem
piece told knew pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six table travel less
morning ten simple several vowel toward war lay against pattern slow center love person money serve
appear road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead
cry dark machine note wait plan figure star box noun field rest correct able pound done beauty
drive stood contain front teach week final gave green oh quick develop ocean warm free minute
strong special mind behind clear tail produce fact street inch multiply nothing course stay wheel
full force blue object decide surface deep moon island foot system busy test record boat common
gold possible plane stead dry wonder laugh thousand ago ran check game shape equate miss brought
heat snow tire bring yes distant fill east paint language among grand ball yet wave drop heart
present heavy dance engine position arm wide sail material size vary settle speak weight general
ice matter circle pair include divide syllable felt perhaps pick sudden count square reason length
represent art subject region energy hunt probable bed brother egg ride cell believe fraction forest
sit race window store summer train sleep prove lone leg exercise wall catch mount wish sky board
joy winter sat written wild instrument kept glass grass cow job edge sign visit past soft fun
bright gas weather month million bear finish happy hope flower clothe strange gone jump baby eight
village meet root buy raise solve metal whether push seven paragraph third shall held hair describe
cook floor either result burn hill safe cat century consider type law bit coast copy phrase silent
tall sand soil roll temperature finger industry value fight lie beat excite natural view sense ear
else quite broke case middle kill son lake moment scale loud spring observe child straight
consonant nation dictionary milk speed method organ pay age section dress cloud surprise quiet
stone tiny climb cool design poor lot experiment bottom key iron single stick flat twenty skin
smile crease hole trade melody trip office receive row mouth exact symbol die least trouble shout
except wrote seed tone join suggest clean break lady yard rise bad blow oil blood touch grew cent
mix team wire cost lost brown wear garden equal sent choose fell fit flow fair bank collect save
control decimal gentle woman captain practice separate difficult doctor please protect noon whose
locate ring character insect caught period indicate radio spoke atom human history effect electric
expect crop modern element hit student corner party supply bone rail imagine provide agree thus
capital chair danger fruit rich thick soldier process operate guess necessary sharp wing create
neighbor wash bat rather crowd corn compare poem string bell depend meat rub tube famous dollar
stream fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh search
send yellow gun allow print dead spot desert suit current lift rose continue block chart hat sell
success company subtract event particular deal swim term opposite wife shoe shoulder spread arrange
camp invent cotton born determine quart nine truck noise level chance gather shop stretch throw
shine property column molecule select wrong gray repeat require broad prepare salt nose plural
anger claim continent oxygen sugar death pretty skill women season solution magnet silver thank
branch match suffix especially fig afraid huge sister steel discuss forward similar guide
experience score apple bought led pitch coat mass card band rope slip win dream evening condition
feed tool total basic smell valley nor double seat arrive master track parent shore division sheet
substance favor connect post spend chord fat glad original share station dad bread charge proper
bar offer segment slave duck instant market degree populate chick dear enemy reply drink occur
support speech nature range steam motion path liquid log meant quotient teeth shell neck
"""
COMMON = COMMON_WORDS.split()

NAMES = """
Alice Bob Carol David Emma Frank Grace Henry Isabel Jack Karen Liam Maria Noah Olivia Peter Quinn
Rosa Sam Tara Uma Victor Wendy Xavier Yara Zoe Ahmed Mei Sofia Lucas Priya Kenji Fatima Diego
Hannah Omar
""".split()

MATH_NOUNS = """
apples oranges pencils books marbles cookies stickers cupcakes tickets coins stamps flowers eggs
cards candies shirts boxes bags bottles cars toys balloons pages miles hours minutes dollars cents
students teachers friends trees seeds chairs tables blocks bricks gallons liters meters kilograms
""".split()

MATH_VERBS = """
buys sells gives eats finds loses collects bakes plants reads spends earns saves shares makes picks
""".split()

MATH_PHRASES = """
How many are left?|How much does it cost in total?|What is the total?|
How many does she have now?|How many more does he need?|What is the average?|
What percent of them are red?|How long will it take?|Let's think step by step.|First, we compute|
Then we add|Next, we subtract|So the answer is|Therefore, the final answer is|
The remaining amount is|Each one costs|twice as many as|half as many as|three times as many|
per hour|per day|in total|altogether|at first|at the end|the rest|the difference|the product of|
the sum of|the quotient of|is divided equally among|a discount of|percent off|
""".replace("\n", "").split("|")

LATEX_SNIPPETS = r"""
\boxed{42}|\boxed{7}|\boxed{\frac{1}{2}}|\frac{3}{4}|\frac{a}{b}|\frac{x+1}{x-1}|\sqrt{16}|\sqrt{2}|
x^2 + y^2 = z^2|3 \times 4 = 12|2 \cdot 5 = 10|\left( a + b \right)|\pi r^2|\sum_{i=1}^{n} i|
\int_0^1 x \, dx|a \leq b|a \geq b|x \neq 0|\approx 3.14|$x = 5$|$$y = 2x + 3$$|\text{dollars}|
\begin{align}|\end{align}|\mathbb{R}|\infty|\alpha + \beta|\theta|\%|
""".replace("\n", "").split("|")

PYTHON_KEYWORDS = """
False None True and as assert async await break class continue def del elif else except finally for
from global if import in is lambda nonlocal not or pass raise return try while with yield print
range len int str float list dict set tuple sum min max abs round sorted enumerate zip map filter
open math numpy self __init__ __name__ __main__ append extend items keys values format isinstance
""".split()

PYTHON_SNIPPETS = [
    "def add(a, b):\n    return a + b\n",
    "def factorial(n):\n    if n <= 1:\n        return 1\n    return n * factorial(n - 1)\n",
    "for i in range(10):\n    print(i * i)\n",
    "total = sum(x for x in numbers if x % 2 == 0)\nprint(total)\n",
    "import math\nprint(math.sqrt(144))\n",
    "result = 12345 * 6789\nprint(result)\n",
    "class Counter:\n    def __init__(self):\n        self.count = 0\n\n"
    "    def step(self):\n        self.count += 1\n",
    "values = [3, 1, 4, 1, 5, 9, 2, 6]\nvalues.sort()\nprint(values[-1])\n",
    "with open('data.txt') as f:\n    lines = f.readlines()\n",
    "try:\n    x = int(text)\nexcept ValueError:\n    x = 0\n",
    "answer = {'name': 'Alice', 'age': 30}\n"
    "for key, value in answer.items():\n    print(key, value)\n",
    "while n > 0:\n    digits.append(n % 10)\n    n //= 10\n",
    "if __name__ == '__main__':\n    main()\n",
    "print(f'The answer is {answer}')\n",
    "```python\nprint(2 ** 10)\n```\n",
    "```output\n1024\n```\n",
]

GAME_WORDS = """
north south east west up down northeast northwest southeast southwest kitchen bedroom bathroom
cellar attic garden hallway living room pantry garage study library door window chest box key lamp
table shelf drawer cupboard fridge oven stove counter sofa bed knife apple coin map sword torch
rope book letter note red blue green yellow wooden iron golden locked unlocked closed open empty
dark
""".split()

GAME_COMMANDS = """
go north|go south|go east|go west|take key|take apple|take the lamp|open door|open the chest|
close door|unlock door with key|examine table|look|inventory|drop sword|put apple in fridge|
put book on shelf|eat apple|read note|insert key into chest|take coin from box|
""".replace("\n", "").split("|")

GAME_OBSERVATIONS = """
You are in the kitchen.|You see a closed door to the north.|There is a table here.|
On the table is an apple.|You are carrying: a key, a lamp.|You are carrying nothing.|
You open the door.|The door is locked.|You take the key.|You can't go that way.|Taken.|Dropped.|
You have won!|Your score has just gone up by one point.|*** The End ***|
""".replace("\n", "").split("|")

AGENT_SNIPPETS = [
    "<search> capital of France </search>",
    "<information> Doc 1: Paris is the capital of France. </information>",
    "<answer> Paris </answer>",
    "Thought: I should look this up.\nAction: search[river length]\n"
    "Observation: The river is long.",
    "Question: Who wrote the book?\nAnswer: The author.",
    "The answer is (A).",
    "Options: (A) yes (B) no (C) maybe (D) unknown",
    "Confidence: 0.8",
]

JSON_SNIPPETS = [
    '{"name": "search", "arguments": {"query": "tallest mountain"}}',
    '{"name": "python", "arguments": {"code": "print(1 + 2)"}}',
    '{"name": "zoom", "arguments": {"x": 10, "y": 20, "scale": 2.5}}',
    '{"type": "function", "function": {"name": "get_weather", "description": "Get the weather.", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, '
    '"required": ["city"]}}}',
    '[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]',
    '{"answer": 42, "reasoning": null, "done": true, "items": [], "score": -1.5}',
]


def _number(rng: random.Random) -> str:
    return str(rng.choice([rng.randint(0, 20), rng.randint(0, 1000), rng.randint(0, 10**6)]))


def _english_sentence(rng: random.Random, words: list[str]) -> str:
    body = " ".join(rng.choice(words) for _ in range(rng.randint(4, 14)))
    return body[0].upper() + body[1:] + rng.choice([".", ".", ".", "?", "!", ","])


def _word_problem(rng: random.Random) -> str:
    name, other = rng.sample(NAMES, 2)
    noun = rng.choice(MATH_NOUNS)
    a, b = rng.randint(2, 99), rng.randint(1, 50)
    return (
        f"{name} has {a} {noun}. {name} {rng.choice(MATH_VERBS)} {b} {noun} to {other}. "
        f"{rng.choice(MATH_PHRASES)}\n\n{a} - {b} = {a - b}. {rng.choice(MATH_PHRASES)} "
        f"{rng.choice(LATEX_SNIPPETS)}\nThe answer is \\boxed{{{a - b}}}."
    )


def _game_turn(rng: random.Random) -> str:
    thing, place, direction = (rng.choice(GAME_WORDS) for _ in range(3))
    return (
        f"> {rng.choice(GAME_COMMANDS)}\n{rng.choice(GAME_OBSERVATIONS)} "
        f"You see a {thing} {place} to the {direction}."
    )


def _code_line(rng: random.Random) -> str:
    names = rng.sample(PYTHON_KEYWORDS, 3)
    return f"{names[0]} = {names[1]}({names[2]}, {_number(rng)})  # {rng.choice(COMMON)}"



def build_corpus(seed: int = 0, n_passages: int = 6000) -> list[str]:
    """Return the training passages, identical on every machine and Python 3 version (a seeded
    `random.Random` is stable across them)."""
    rng = random.Random(seed)
    english = COMMON + GAME_WORDS + MATH_NOUNS
    fixed = (
        COMMON + NAMES + MATH_NOUNS + MATH_VERBS + MATH_PHRASES + LATEX_SNIPPETS + PYTHON_KEYWORDS
        + PYTHON_SNIPPETS + GAME_WORDS + GAME_COMMANDS + GAME_OBSERVATIONS + AGENT_SNIPPETS
        + JSON_SNIPPETS
    )
    makers = [
        lambda: _english_sentence(rng, english),
        lambda: _english_sentence(rng, english),
        lambda: _word_problem(rng),
        lambda: _game_turn(rng),
        lambda: _code_line(rng),
        lambda: rng.choice(PYTHON_SNIPPETS),
        lambda: rng.choice(JSON_SNIPPETS),
        lambda: rng.choice(AGENT_SNIPPETS),
    ]
    return fixed + [rng.choice(makers)() for _ in range(n_passages)]
